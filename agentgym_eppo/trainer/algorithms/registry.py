"""Name -> builder tables (advantage estimators, clip policies), with one-line errors.

An unknown name is an error naming the known ones and the closest match, the way
Gymnasium's registration answers a mistyped environment id:

>>> table = Registry("clip policy", {"eppo": 1, "fixed": 2})
>>> table.lookup("epo", where="clip.policy")
Traceback (most recent call last):
...
agentgym_eppo.trainer.algorithms.registry.UnknownNameError: clip.policy: unknown clip policy 'epo' (did you mean 'eppo'?); known: eppo, fixed
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Mapping
from typing import Generic, TypeVar

T = TypeVar("T")


class UnknownNameError(ValueError):
    """A name no table entry has; the message lists the known names."""


class Registry(Mapping[str, T], Generic[T]):
    """A read-only table of named entries; :meth:`lookup` explains a miss."""

    def __init__(self, kind: str, entries: Mapping[str, T]) -> None:
        self.kind = kind
        self._entries = dict(entries)

    def __getitem__(self, name: str) -> T:
        return self._entries[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def lookup(self, name: str, where: str = "") -> T:
        """The entry ``name``; :class:`UnknownNameError` (one line) when there is none."""
        if name in self._entries:
            return self._entries[name]
        close = difflib.get_close_matches(str(name), list(self._entries), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        prefix = f"{where}: " if where else ""
        raise UnknownNameError(
            f"{prefix}unknown {self.kind} {name!r}{hint}; known: {', '.join(sorted(self))}"
        )
