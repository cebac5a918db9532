"""The real ALFWorld text engine (TextWorld's PDDL environment), made cheap to reset.

One :class:`ALFWorldEngine` plays one game at a time through the same objects
AgentBench uses under ``AlfredTWEnv``: TextWorld's ``PddlEnv`` (Fast Downward for the
state, the ALFRED grammar for the text) behind alfworld's ``AlfredDemangler`` (which
names ``Mug_bar__plus_00_dot_32...`` "mug 1").

Why it is fast: every reset of the stock engine re-runs the PDDL-to-SAS translation of
its game twice (plain and optimised) and every step re-parses, with TatSu, each command
template and feedback rule it renders. Both are pure functions of their text, so the
engine memoizes them (:class:`EngineCaches`). It also copies the grammar's derivation
contexts shallowly (:func:`_shallow_copy_context`) where TextWorld deep-copies every
entity in them. These replacements are installed only while the engine's own calls
run, and TextWorld's functions are restored afterwards: nothing else in the process
sees them. The
memoized engine's transcripts are byte-for-byte the stock ones (a test replays the
same actions with and without the caches).

Fast Downward's ``pddl2sas`` overwrites ``sys.argv`` on every call; the engine gives the
caller its ``sys.argv`` back, memoized or not.

The engine is not thread-safe across instances: the patch is process-wide while a call
runs, so calls are serialised by one lock.

Engines may share one :class:`EngineCaches`; :func:`shared_caches` hands out the
process's one set per size, which every ``ALFWorldEnv`` of a process uses, so a game
is translated and parsed once per process however many envs play it (two slots of a
GRPO group, or a second evaluation of the same games), not once per env. Sharing is
safe because nothing TextWorld receives from the caches is mutated (see
:class:`EngineCaches`) and the tables are read and written only under the engine's
lock. A forked worker (``start_method="fork"``) inherits a copy of the parent's caches;
its entries are pure functions of their keys, so the copy is as valid as the original
and the two then evolve separately.
"""

from __future__ import annotations

import copy
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import resources
from typing import Any

ALFWORLD_EXTRA_HINT = "pip install agentgym-eppo[alfworld]"

try:
    import fast_downward
    import textworld
    import textworld.envs.pddl.logic as pddl_logic
    import textworld.envs.pddl.textgen as pddl_textgen
    from alfworld.agents.environment.alfred_tw_env import AlfredDemangler
    from textworld.envs.pddl import PddlEnv
    from textworld.logic import Rule
except ImportError as error:  # pragma: no cover - exercised in a subprocess test
    raise ImportError(
        f"the ALFWorld environment needs the alfworld package ({error}); "
        f"install it with: {ALFWORLD_EXTRA_HINT}"
    ) from error

__all__ = [
    "ALFWORLD_EXTRA_HINT",
    "ALFWorldEngine",
    "EngineCaches",
    "GameState",
    "alfred_domain",
    "alfred_grammar",
    "shared_caches",
]


def _alfworld_data_file(name: str) -> str:
    return resources.files("alfworld").joinpath("data", name).read_text(encoding="utf-8")


def alfred_domain() -> str:
    """The ALFRED PDDL domain shipped in the alfworld wheel (``alfworld/data/alfred.pddl``)."""
    return _alfworld_data_file("alfred.pddl")


def alfred_grammar() -> str:
    """The ALFRED text grammar (``alfred.twl2``), its task still ``UNKNOWN GOAL``."""
    return _alfworld_data_file("alfred.twl2")


@dataclass(frozen=True)
class GameState:
    """What one engine call returns: the text, the commands allowed next, and the facts."""

    feedback: str
    admissible_commands: tuple[str, ...]
    won: bool
    facts: tuple[Any, ...]
    """TextWorld propositions with demangled names (the handcoded expert reads them)."""

    def as_expert_state(self) -> dict[str, Any]:
        """The ``game_state`` mapping alfworld's handcoded expert expects."""
        return {
            "feedback": self.feedback,
            "admissible_commands": list(self.admissible_commands),
            "facts": list(self.facts),
            "won": self.won,
        }


class _LRU:
    """A small least-recently-used map: keeps memory flat however many games are played."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._items: OrderedDict[Any, Any] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def get_or_compute(self, key: Any, compute: Callable[[], Any]) -> Any:
        if key in self._items:
            self._items.move_to_end(key)
            self.hits += 1
            return self._items[key]
        self.misses += 1
        value = compute()
        self._items[key] = value
        if len(self._items) > self.capacity:
            self._items.popitem(last=False)
        return value

    def __len__(self) -> int:
        return len(self._items)

    def clear(self) -> None:
        self._items.clear()


class EngineCaches:
    """Memo tables for the pure, repeated work of TextWorld's PDDL engine.

    ``translations``: ``pddl2sas(domain, problem, optimize)`` -> (task, SAS text), two per
    game; bounded by ``max_games``. ``logics``: the parsed grammar of a game (its action
    templates and production rules), bounded the same way. ``templates`` and
    ``queries``: parsed grammar fragments and fact queries, shared by every game that
    uses the ALFRED grammar (a few hundred distinct strings).

    Cached values are either never mutated by TextWorld (translations, parsed logics,
    query rules) or handed out as deep copies (template symbols, which TextWorld fills
    with per-call context).

    ``replanning=False`` (the default) skips the second, optimised translation: TextWorld
    uses it only to re-plan (``PddlState.replan``, the planner expert and walkthrough
    infos), which this project never asks for; the re-planner then gets the plain
    translation, as valid a planning task, only slower to search. It halves the cost of
    loading a game and changes no transcript. Pass ``replanning=True`` to keep both.
    """

    def __init__(self, max_games: int = 64, *, replanning: bool = False) -> None:
        if max_games < 1:
            raise ValueError(f"max_games must be at least 1, got {max_games}")
        self.replanning = replanning
        self.translations = _LRU(2 * max_games)
        self.logics = _LRU(max_games)
        self.templates = _LRU(4096)
        self.queries = _LRU(4096)

    def clear(self) -> None:
        for table in (self.translations, self.logics, self.templates, self.queries):
            table.clear()


_PATCH_LOCK = threading.RLock()
_STOCK_PDDL2SAS = fast_downward.pddl2sas
_STOCK_LOAD_LIB = fast_downward.load_lib
_IDLE_LIBRARIES: list[Any] = []
"""Fast Downward library copies of closed engines, each reused by one new engine."""
_IDLE_LIBRARIES_LOCK = threading.Lock()
_SHARED_CACHES: dict[tuple[int, bool], EngineCaches] = {}
_STOCK_PARSE_TEMPLATE = pddl_textgen._parse_and_convert
_STOCK_PARSE_LOGIC = pddl_logic._parse_and_convert
_STOCK_PARSE_QUERY = Rule.parse_conjunctive_query.__func__
_STOCK_COPY_CONTEXT = pddl_textgen.copy_context


def shared_caches(max_games: int = 64, *, replanning: bool = False) -> EngineCaches:
    """The process's one :class:`EngineCaches` of this size, created on first use.

    Every caller asking for the same ``(max_games, replanning)`` gets the same object,
    so memory is bounded per size (``max_games`` games, least recently used evicted),
    not per engine. ``shared_caches(n).clear()`` empties it for everyone.
    """
    key = (max_games, replanning)
    with _PATCH_LOCK:
        caches = _SHARED_CACHES.get(key)
        if caches is None:
            caches = _SHARED_CACHES[key] = EngineCaches(max_games, replanning=replanning)
        return caches


def _shallow_copy_context(context: Mapping[str, Any]) -> dict[str, Any]:
    """TextWorld's ``copy_context`` without deep-copying the entities it names.

    The grammar adds entries to a context's ``variables`` and ``mapping`` dicts but never
    changes the entity objects in them, so copying the dicts is enough; the stock deep
    copy of every entity is most of a step's cost.
    """
    return {
        "state": context["state"],
        "facts": context["facts"],
        "variables": dict(context["variables"]),
        "mapping": dict(context["mapping"]),
        "entity_infos": context["entity_infos"],
    }


def _argv_preserving_pddl2sas(
    translate: Callable[..., Any], cache: _LRU | None, replanning: bool
) -> Callable[..., Any]:
    """``pddl2sas`` that gives ``sys.argv`` back, memoizes when given a cache, and, unless
    ``replanning``, answers the optimised translation with the plain one."""

    def pddl2sas(domain: str, problem: str, verbose: bool = False, optimize: bool = False) -> Any:
        optimize = bool(optimize) and replanning

        def run() -> Any:
            saved = sys.argv
            try:
                return translate(domain, problem, verbose=verbose, optimize=optimize)
            finally:
                sys.argv = saved

        if cache is None:
            return run()
        return cache.get_or_compute((domain, problem, optimize), run)

    return pddl2sas


def _reuse_or_load_library() -> Any:
    """A closed engine's library copy if one is idle, else a fresh copy (``load_lib``)."""
    with _IDLE_LIBRARIES_LOCK:
        if _IDLE_LIBRARIES:
            return _IDLE_LIBRARIES.pop()
    return _STOCK_LOAD_LIB()


@contextmanager
def _engine_patches(caches: EngineCaches | None) -> Iterator[None]:
    """Install the ``sys.argv`` guard (always) and the memo tables (if any) for one call."""
    with _PATCH_LOCK:
        fast_downward.pddl2sas = _argv_preserving_pddl2sas(
            _STOCK_PDDL2SAS,
            caches.translations if caches else None,
            replanning=caches.replanning if caches else True,
        )
        if caches is not None:
            pddl_textgen._parse_and_convert = _memoized_template_parser(caches.templates)
            pddl_logic._parse_and_convert = _memoized_logic_parser(caches.logics)
            Rule.parse_conjunctive_query = classmethod(_memoized_query_parser(caches.queries))
            pddl_textgen.copy_context = _shallow_copy_context
        try:
            yield
        finally:
            fast_downward.pddl2sas = _STOCK_PDDL2SAS
            pddl_textgen._parse_and_convert = _STOCK_PARSE_TEMPLATE
            pddl_logic._parse_and_convert = _STOCK_PARSE_LOGIC
            Rule.parse_conjunctive_query = classmethod(_STOCK_PARSE_QUERY)
            pddl_textgen.copy_context = _STOCK_COPY_CONTEXT


def _memoized_template_parser(cache: _LRU) -> Callable[..., Any]:
    def parse(text: str, rule_name: str, **kwargs: Any) -> Any:
        parsed = cache.get_or_compute(
            (text, rule_name), lambda: _STOCK_PARSE_TEMPLATE(text, rule_name=rule_name, **kwargs)
        )
        return copy.deepcopy(parsed)

    return parse


def _memoized_logic_parser(cache: _LRU) -> Callable[..., Any]:
    def parse(text: str, rule_name: str, **kwargs: Any) -> Any:
        return cache.get_or_compute(
            (text, rule_name), lambda: _STOCK_PARSE_LOGIC(text, rule_name=rule_name, **kwargs)
        )

    return parse


def _memoized_query_parser(cache: _LRU) -> Callable[..., Any]:
    def parse(cls: type, expression: str) -> Any:
        return cache.get_or_compute(expression, lambda: _STOCK_PARSE_QUERY(cls, expression))

    return parse


class ALFWorldEngine:
    """Plays ALFWorld games (``game.tw-pddl`` contents) on TextWorld's PDDL engine.

    ``memoize=False`` runs the stock engine (still returning ``sys.argv``), which the
    transcript-equality test and the benchmark compare against. Without ``caches`` a
    memoizing engine gets a private :class:`EngineCaches`; pass :func:`shared_caches`
    to share the process's.
    """

    def __init__(self, *, memoize: bool = True, caches: EngineCaches | None = None) -> None:
        self.caches: EngineCaches | None = (caches or EngineCaches()) if memoize else None
        infos = textworld.EnvInfos(admissible_commands=True, won=True, facts=True, feedback=True)
        with _engine_patches(self.caches):
            fast_downward.load_lib = _reuse_or_load_library
            try:
                self._pddl = PddlEnv(infos)
            finally:
                fast_downward.load_lib = _STOCK_LOAD_LIB
            self._env = AlfredDemangler(self._pddl, shuffle=False)
        self._loaded: Mapping[str, Any] | None = None
        self._closed = False

    def load(self, game: Mapping[str, Any]) -> None:
        """Load a game (the JSON of a ``game.tw-pddl``); a no-op if it is already loaded."""
        self._check_open()
        if self._loaded is game:
            return
        with _engine_patches(self.caches):
            self._env.load(dict(game))
        self._loaded = game

    def reset(self) -> GameState:
        """Start the loaded game from its initial state."""
        self._check_open()
        if self._loaded is None:
            raise RuntimeError("no game loaded: call load() first")
        with _engine_patches(self.caches):
            return _game_state(self._env.reset())

    def step(self, command: str) -> GameState:
        """Apply one command; one that is not admissible answers "Nothing happens."."""
        self._check_open()
        if self._loaded is None:
            raise RuntimeError("no game loaded: call load() first")
        with _engine_patches(self.caches):
            state, _, _ = self._env.step(command)
        return _game_state(state)

    def play(self, game: Mapping[str, Any], commands: Sequence[str]) -> list[GameState]:
        """Load, reset and apply ``commands``; the states, first the initial one."""
        self.load(game)
        states = [self.reset()]
        states.extend(self.step(command) for command in commands)
        return states

    def close(self) -> None:
        """Release the loaded game and hand the engine's library copy on; idempotent.

        Each engine needs a private copy of Fast Downward's library (it keeps its state in
        globals). Unloading a copy with ``dlclose`` corrupted the process (a later
        engine's ``dlopen`` crashed with a segmentation fault in the test suite), so a
        closed engine's copy is cleaned and kept for the next engine instead.
        """
        if not self._closed:
            self._closed = True
            self._loaded = None
            library = self._pddl.downward_lib
            library.cleanup()
            with _IDLE_LIBRARIES_LOCK:
                _IDLE_LIBRARIES.append(library)

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("the ALFWorld engine is closed")


def _game_state(state: Any) -> GameState:
    return GameState(
        feedback=str(state["feedback"]),
        admissible_commands=tuple(state["admissible_commands"]),
        won=bool(state["won"]),
        facts=tuple(state["facts"]),
    )
