"""Named families (tasks, splits, back-ends, engines, clip policies...) as one kind of table.

Every choice made by name goes through a :class:`Registry`; an unknown name is a one-line
error naming the known ones and the closest match, the way Gymnasium's registration
answers a mistyped environment id. :func:`did_you_mean` is that closest-match hint, the
one place it is computed, for the few messages that are not a registry's.

>>> table = Registry("clip policy", {"eppo": 1, "fixed": 2})
>>> table.lookup("epo", where="clip.policy")
Traceback (most recent call last):
...
agentgym_eppo.core.registry.UnknownNameError: clip.policy: unknown clip policy 'epo' (did you mean 'eppo'?); known: eppo, fixed
>>> did_you_mean("stepz", ["steps", "lr"], show=lambda name: f"rl.{name}")
' (did you mean rl.steps?)'
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Generic, TypeVar

T = TypeVar("T")


def did_you_mean(name: object, known: Iterable[str], show: Callable[[str], str] = repr) -> str:
    """``" (did you mean X?)"`` for the known name closest to ``name`` (``show`` renders
    it), or ``""`` when none is close."""
    close = difflib.get_close_matches(str(name), list(known), n=1)
    return f" (did you mean {show(close[0])}?)" if close else ""


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

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}: {', '.join(self)})"

    def lookup(self, name: str, where: str = "") -> T:
        """The entry ``name``; :class:`UnknownNameError` (one line) when there is none."""
        if name in self._entries:
            return self._entries[name]
        prefix = f"{where}: " if where else ""
        raise UnknownNameError(
            f"{prefix}unknown {self.kind} {name!r}{did_you_mean(name, self)}; "
            f"known: {', '.join(sorted(self))}"
        )
