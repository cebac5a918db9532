"""The soak run: many episodes of all five tasks, then count what was left behind.

:func:`run_soak` drives a :class:`~agentgym_eppo.vector.MultiTaskVectorEnv` over the
five AgentBench tasks with :class:`SoakPolicy` (a random-but-valid policy with a share
of garbage actions) until the requested number of episodes has ended, samples the
memory of the vector env's processes as it goes, closes the vector env, and compares a
:class:`ResourceSnapshot` taken after the close with one taken before it started.

The policy plays a fraction of episodes with the task's expert (so that completions,
answer judging and table hashing run too) and the rest with schema-valid calls of a
random tool whose arguments are drawn from the task's vocabulary and the current
observation; on every turn an action is garbage (malformed JSON, unknown tools, wrong
types, huge or control-character strings, several calls) with probability
``garbage_rate``. Everything that can be leaked is counted by what owns it
(``benchmarks/holdings.py``): processes
by an environment marker that every child inherits, temp files in a private
``TMPDIR``, cgroups by the owning worker pids, MariaDB databases by the soak's window.
``benchmarks/bench_reliability.py`` runs the long soak; ``tests/test_reliability_soak.py``
a short one.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from multiprocessing import resource_tracker
from pathlib import Path
from typing import Any

import psutil

from agentgym_eppo.core import Status
from agentgym_eppo.vector import EXPERT_ACTION, MultiTaskVectorEnv, StepOutcome
from benchmarks.holdings import Holdings, count_holdings, marked_processes, private_environment

ALL_TASKS = ("os", "db", "kg", "alfworld", "webshop")
MARIADB_URL = os.environ.get("AGENTGYM_MARIADB_URL", "mysql+pymysql://root@127.0.0.1:3306/test")

TASK_PHRASES: dict[str, tuple[str, ...]] = {
    "os": (
        "ls /",
        "echo hello",
        "cat /etc/os-release | head -3",
        "wc -l /etc/passwd",
        "mkdir -p /tmp/soak && echo data > /tmp/soak/file && cat /tmp/soak/file",
        "sleep 0.05; echo slept",
        "seq 1 100000 | tail -1",
        "yes | head -c 5000",
        "ps aux | wc -l",
        "sleep 30 &",
        "cd /root && ls -la",
        "exit",
    ),
    "db": (
        "SHOW TABLES",
        "SELECT 1",
        "SELECT COUNT(*) FROM information_schema.tables",
        "SELEC broken FROM nowhere",
        "CREATE TABLE soak_t (a INT)",
        "DROP TABLE soak_t",
    ),
    "kg": ("#0", "#1", "#2", "people.person.nationality", "location.location.containedby"),
    "alfworld": ("look", "inventory", "go to cabinet 1", "open drawer 1", "take mug 1"),
    "webshop": ("search", "back to search", "< prev", "next >", "buy now", "red shirt"),
}
"""Phrases the random policy mixes with words and lines of the current observation."""


# ---------------------------------------------------------------------- the policy


def garbage_action(rng: random.Random) -> Any:
    """One action that no tool accepts as it is (each kind must end or cost a turn)."""
    kinds: tuple[Callable[[], Any], ...] = (
        lambda: "".join(chr(rng.randrange(0, 0x2FFFF)) for _ in range(rng.randrange(1, 80))),
        lambda: '<tool_call>{"name": "bash_action", "arguments": {"script": "ls"',
        lambda: json.dumps({"name": "no_such_tool", "arguments": {}}),
        lambda: json.dumps({"name": "execute_sql", "arguments": {"query": 42}}),
        lambda: json.dumps({"name": "take_action", "arguments": ["go"]}),
        lambda: "<tool_call>" + '{"a":' * 5000 + "1" + "}" * 5000 + "</tool_call>",
        lambda: "x" * rng.randrange(10_000, 200_000),
        lambda: "\x00\x01\x1b[31m\ud800 control \udfff",
        lambda: '<tool_call>{"name": "a", "arguments": {}}</tool_call>' * 2,
        lambda: bytes(rng.randrange(256) for _ in range(32)),
        lambda: {"tool_calls": []},
        lambda: 12345,
    )
    return rng.choice(kinds)()


def random_valid_call(
    tools: Sequence[Mapping[str, Any]], words: Sequence[str], rng: random.Random
) -> dict[str, Any]:
    """A call of a random tool of ``tools`` (OpenAI schemas) whose arguments satisfy the
    schema, drawn from ``words``."""
    function = rng.choice(list(tools))["function"]
    parameters = function.get("parameters", {})
    arguments: dict[str, Any] = {}
    for key, schema in parameters.get("properties", {}).items():
        arguments[key] = _value_for(schema, words, rng)
    return {"name": function["name"], "arguments": arguments}


def _value_for(schema: Mapping[str, Any], words: Sequence[str], rng: random.Random) -> Any:
    kind = schema.get("type", "string")
    kind = rng.choice(kind) if isinstance(kind, list) else kind
    if "enum" in schema:
        return rng.choice(list(schema["enum"]))
    if kind == "array":
        item = schema.get("items", {"type": "string"})
        return [_value_for(item, words, rng) for _ in range(rng.randrange(1, 4))]
    if kind in ("integer", "number"):
        return rng.randrange(0, 10)
    if kind == "boolean":
        return rng.random() < 0.5
    return rng.choice(list(words))


def observation_words(observation: str, limit: int = 64) -> list[str]:
    """Candidate argument values from an observation: its lines and its words."""
    lines = [line.strip() for line in observation.splitlines() if 0 < len(line.strip()) < 80]
    words = re.findall(r"[A-Za-z#_.][\w#.]*", observation)
    return (lines[:limit] + words[:limit]) or ["x"]


@dataclass
class SoakPolicy:
    """Random-but-valid play with garbage: one decision per turn, per slot."""

    seed: int
    garbage_rate: float = 0.1
    expert_share: float = 0.3
    answer_rate: float = 0.15
    rng: random.Random = field(init=False)
    _expert_slots: set[int] = field(default_factory=set, init=False)
    _tools: dict[int, list[Mapping[str, Any]]] = field(default_factory=dict, init=False)
    _task: dict[int, str] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)

    def begin(self, slot: int, info: Mapping[str, Any]) -> None:
        """A new episode in ``slot``: decide whether the expert plays it."""
        self._tools[slot] = list(info["tools"])
        self._task[slot] = str(info["task_id"])
        self._expert_slots.discard(slot)
        if self.rng.random() < self.expert_share:
            self._expert_slots.add(slot)

    def act(self, slot: int, observation: str) -> Any:
        if self.rng.random() < self.garbage_rate:
            return garbage_action(self.rng)
        if slot in self._expert_slots:
            return EXPERT_ACTION
        words = list(TASK_PHRASES.get(self._task[slot], ())) + observation_words(observation)
        tools = self._tools[slot]
        ending = [t for t in tools if _is_answer_tool(t)]
        if ending and self.rng.random() < self.answer_rate:
            tools = ending
        else:
            tools = [t for t in tools if not _is_answer_tool(t)] or tools
        return random_valid_call(tools, words, self.rng)


def _is_answer_tool(tool: Mapping[str, Any]) -> bool:
    name = tool["function"]["name"]
    return name in ("answer_action", "finish_action", "commit_final_answer", "final_answer")


# ---------------------------------------------------------------------- resources


@dataclass(frozen=True)
class ResourceSnapshot(Holdings):
    """What the soak's processes hold at one moment (counted by owner, not system-wide)."""

    databases: int
    db_users: int


def snapshot(
    marker: str, temp_dir: Path, owner_pids: set[int], db_url: str | None, since: float
) -> ResourceSnapshot:
    counts = count_holdings(psutil.Process(), marker, temp_dir, owner_pids, db_url, since)
    return ResourceSnapshot.of(counts)


def rss_by_owner(venv: MultiTaskVectorEnv) -> dict[str, int]:
    """Resident memory of this process (``"main"``) and of the workers, summed per task."""
    owners = {"main": psutil.Process().memory_info().rss}
    pids: list[int] = getattr(venv.pool, "pids", list)()
    for worker, pid in enumerate(pids):
        task = venv.task_ids[venv.pool.worker_slots[worker][0]]
        with contextlib.suppress(psutil.Error):
            owners[task] = owners.get(task, 0) + psutil.Process(pid).memory_info().rss
    return owners


# ---------------------------------------------------------------------- the run


@dataclass
class SoakReport:
    """Figures of one soak run."""

    episodes: int
    steps: int
    seconds: float
    slots: dict[str, int]
    statuses: dict[str, dict[str, int]]
    garbage_actions: int
    worker_restarts: int
    before: ResourceSnapshot
    after: ResourceSnapshot
    rss_samples: list[tuple[int, dict[str, int]]]
    """(episodes ended, RSS bytes per owner: "main" and each task's workers) per sample."""
    leftover_processes: list[str] = field(default_factory=list)
    leaked: dict[str, int] = field(init=False)

    def __post_init__(self) -> None:
        self.leaked = self.after.minus(self.before)

    def rss_growth(self, after_episodes: int) -> dict[str, int]:
        """Per owner and in total ("all"): RSS at the last sample minus RSS at the first
        sample taken after ``after_episodes`` episodes (warm-up excluded)."""
        warm = [rss for done, rss in self.rss_samples if done >= after_episodes]
        if len(warm) < 2:
            return {}
        growth = {owner: warm[-1].get(owner, 0) - warm[0].get(owner, 0) for owner in warm[0]}
        growth["all"] = sum(warm[-1].values()) - sum(warm[0].values())
        return growth


def run_soak(
    episodes: int,
    *,
    tasks: Sequence[str] = ALL_TASKS,
    slots_per_task: int = 2,
    split: str = "dev",
    garbage_rate: float = 0.1,
    seed: int = 0,
    db_url: str | None = None,
    sample_every: int = 100,
    env_kwargs: Mapping[str, Mapping[str, Any]] | None = None,
    progress: Any = None,
    budget_s: float | None = None,
    drain: bool = True,
    min_episodes_per_task: int = 0,
) -> SoakReport:
    """Play ``episodes`` episodes over ``tasks`` and measure what is left behind.

    ``db_url`` puts the DB task on a server (MariaDB: databases and users are then
    counted); ``progress(done, total)`` is called after each sample. With ``budget_s``
    the run stops starting episodes once that many seconds have passed (the report
    says how many episodes it reached). ``drain=False`` closes the vector env while the
    last steps are still running, as an interrupted program would; ``True`` (default)
    collects them first. ``min_episodes_per_task`` plays on past ``episodes`` until every
    task has ended that many (a slow task's episodes can outlast the fast tasks' quota).
    """
    marker = f"{os.getpid()}-{time.time_ns()}"
    since = time.time()
    kwargs = {task: dict((env_kwargs or {}).get(task, {})) for task in tasks}
    if db_url is not None and "db" in kwargs:
        kwargs["db"].setdefault("db_url", db_url)
    with private_environment(marker) as temp_dir:
        owner_pids: set[int] = set()
        resource_tracker.ensure_running()  # its pipe and process live as long as we do
        before = snapshot(marker, temp_dir, owner_pids, db_url, since)
        policy = SoakPolicy(seed, garbage_rate=garbage_rate)
        statuses: dict[str, Counter[str]] = {task: Counter() for task in tasks}
        garbage = steps = restarts = done = 0
        samples: list[tuple[int, dict[str, int]]] = []
        started = time.perf_counter()
        venv = MultiTaskVectorEnv(
            {task: slots_per_task for task in tasks},
            group_size=1,
            split=split,
            env_kwargs=kwargs,
            backend="subprocess",
            seed=seed,
        )
        try:
            pool_pids: Callable[[], list[int]] = getattr(venv.pool, "pids", list)
            observations = dict.fromkeys(range(venv.num_envs), "")
            pending: set[int] = set()

            def tally(outcome: StepOutcome) -> bool:
                """Count one outcome; True when its episode ended."""
                nonlocal steps, done, restarts
                steps += 1
                pending.discard(outcome.index)
                observations[outcome.index] = outcome.observation
                if not (outcome.terminated or outcome.truncated):
                    return False
                status = str(outcome.info.get("status", Status.TASK_ERROR.value))
                statuses[outcome.info.get("task_id", "?")][status] += 1
                restarts += bool(outcome.info.get("worker_restarted"))
                done += 1
                if done % sample_every == 0:
                    owner_pids.update(pool_pids())
                    samples.append((done, rss_by_owner(venv)))
                    if progress is not None:
                        progress(done, episodes)
                return True

            def finished_playing() -> bool:
                if budget_s is not None and time.perf_counter() - started > budget_s:
                    return True
                return done >= episodes and all(
                    sum(statuses[task].values()) >= min_episodes_per_task for task in tasks
                )

            idle = list(range(venv.num_envs))
            resets = venv.reset_some(idle)
            while True:
                for index, observation, info in resets:
                    observations[index] = observation
                    policy.begin(index, info)
                if finished_playing():
                    break
                actions = [policy.act(i, observations[i]) for i in idle]
                garbage += sum(1 for a in actions if not _looks_valid(a))
                venv.submit_steps(idle, actions)
                pending.update(idle)
                finished: list[int] = []
                idle = []
                for outcome in venv.collect_steps():
                    (finished if tally(outcome) else idle).append(outcome.index)
                resets = venv.reset_some(finished) if finished and not finished_playing() else []
                idle += [index for index, _, _ in resets]
            while drain and pending:
                for outcome in venv.collect_steps():
                    tally(outcome)
            owner_pids.update(pool_pids())
        finally:
            venv.close()
        seconds = time.perf_counter() - started
        after = _settled_snapshot(before, marker, temp_dir, owner_pids, db_url, since)
        leftovers = [_describe(p) for p in marked_processes(marker, trackers=True)]
    return SoakReport(
        episodes=done,
        steps=steps,
        seconds=seconds,
        slots={task: slots_per_task for task in tasks},
        statuses={task: dict(counter) for task, counter in statuses.items()},
        garbage_actions=garbage,
        worker_restarts=restarts,
        before=before,
        after=after,
        rss_samples=samples,
        leftover_processes=leftovers,
    )


SETTLE_S = 10.0


def _settled_snapshot(
    before: ResourceSnapshot,
    marker: str,
    temp_dir: Path,
    owner_pids: set[int],
    db_url: str | None,
    since: float,
) -> ResourceSnapshot:
    """The snapshot after the close, retaken for up to :data:`SETTLE_S` seconds while it
    shows more than ``before``: killed children are reaped, databases are dropped by a
    background thread, and other users of a shared MariaDB server create short-lived
    episode databases of their own; what is still there after the wait is a leak."""
    deadline = time.monotonic() + SETTLE_S
    while True:
        time.sleep(0.5)
        after = snapshot(marker, temp_dir, owner_pids, db_url, since)
        if all(value <= 0 for value in after.minus(before).values()):
            return after
        if time.monotonic() > deadline:
            return after


def _describe(process: psutil.Process) -> str:
    with contextlib.suppress(psutil.Error):
        return f"{process.pid} {' '.join(process.cmdline())[:120]}"
    return str(process.pid)


def _looks_valid(action: Any) -> bool:
    return action is EXPERT_ACTION or (isinstance(action, dict) and "arguments" in action)
