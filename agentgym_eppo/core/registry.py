"""Named families (tasks, splits, back-ends, engines, clip policies...) as one kind of table.

Every choice made by name goes through a :class:`Registry`; an unknown name is a one-line
error naming the known ones and the closest match, the way Gymnasium's registration
answers a mistyped environment id. :func:`did_you_mean` is that closest-match hint, the
one place it is computed, for the few messages that are not a registry's.

The tables are open: :meth:`Registry.register` adds an entry from any code (also as a
decorator), the way verl's ``register_policy_loss`` does, and refuses a name already
taken unless ``replace=True``.

>>> table = Registry("clip policy", {"eppo": 1, "fixed": 2})
>>> table.lookup("epo", where="clip.policy")
Traceback (most recent call last):
...
agentgym_eppo.core.registry.UnknownNameError: clip.policy: unknown clip policy 'epo' (did you mean 'eppo'?); known: eppo, fixed
>>> table.register("tight", 3)
3
>>> @table.register("wide")
... def wide():
...     return 4
>>> sorted(table)
['eppo', 'fixed', 'tight', 'wide']
>>> table.register("eppo", 5)
Traceback (most recent call last):
...
ValueError: clip policy 'eppo' is already registered; pass replace=True to replace it
>>> did_you_mean("stepz", ["steps", "lr"], show=lambda name: f"rl.{name}")
' (did you mean rl.steps?)'
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Generic, TypeVar, overload

T = TypeVar("T")
E = TypeVar("E")


def did_you_mean(name: object, known: Iterable[str], show: Callable[[str], str] = repr) -> str:
    """``" (did you mean X?)"`` for the known name closest to ``name`` (``show`` renders
    it), or ``""`` when none is close."""
    close = difflib.get_close_matches(str(name), list(known), n=1)
    return f" (did you mean {show(close[0])}?)" if close else ""


class UnknownNameError(ValueError):
    """A name no table entry has; the message lists the known names."""


class Registry(Mapping[str, T], Generic[T]):
    """A table of named entries: read as a mapping, :meth:`lookup` explains a miss,
    :meth:`register` adds an entry.

    ``check(name, entry)``, when given, runs before an entry goes in and raises
    ``ValueError`` (or ``TypeError``) saying what is wrong with it; each ``watcher``
    (:meth:`watch`) runs after the table changed, so that what is derived from the table
    (a config section's fields, a help text) follows it.
    """

    def __init__(
        self,
        kind: str,
        entries: Mapping[str, T] | None = None,
        *,
        check: Callable[[str, T], None] | None = None,
    ) -> None:
        self.kind = kind
        self._check = check
        self._entries: dict[str, T] = {}
        self._watchers: list[Callable[[], None]] = []
        for name, entry in (entries or {}).items():
            self.register(name, entry)

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

    @overload
    def register(self, name: str, entry: E, *, replace: bool = False) -> E: ...

    @overload
    def register(self, name: str, *, replace: bool = False) -> Callable[[E], E]: ...

    def register(self, name: str, entry: Any = None, *, replace: bool = False) -> Any:
        """Add ``entry`` under ``name`` and return it; without ``entry``, a decorator that
        registers what it decorates (a class, a function) and returns it unchanged.

        ``ValueError`` when ``name`` is taken (``replace=True`` replaces the entry) or is
        not a plain name, or when the table's ``check`` refuses the entry.
        """
        if entry is None:
            return lambda decorated: self.register(name, decorated, replace=replace)
        if not isinstance(name, str) or not name.strip() or name != name.strip():
            raise ValueError(f"a {self.kind} name is a non-empty string, got {name!r}")
        if name in self._entries and not replace:
            raise ValueError(
                f"{self.kind} {name!r} is already registered; pass replace=True to replace it"
            )
        if self._check is not None:
            self._check(name, entry)
        self._entries[name] = entry
        self._changed()
        return entry

    def unregister(self, name: str) -> T:
        """Remove the entry ``name`` and return it (``UnknownNameError`` if there is none):
        what a test that registered an entry calls when it is done with it."""
        entry = self.lookup(name)
        del self._entries[name]
        self._changed()
        return entry

    def watch(self, watcher: Callable[[], None]) -> None:
        """Call ``watcher()`` after every change of the table."""
        self._watchers.append(watcher)

    def _changed(self) -> None:
        for watcher in self._watchers:
            watcher()
