"""The OpenEnv servers under load: a soak over the five tasks and the cost of the wire.

Soak: for each task a real server (``python -m agentgym_eppo.serving``, in a subprocess
carrying the soak's process marker and private ``TMPDIR``) is played by
:data:`CLIENTS` concurrent OpenEnv clients with the soak's random-but-valid policy and
its garbage actions (``benchmarks/soak.py``), episodes cut short at
:data:`MAX_TURNS`. A client opens a new connection every :data:`EPISODES_PER_CONNECTION`
episodes, and every :data:`ABANDON_EVERY`-th episode it drops its connection
mid-episode without closing. DB episodes run on MariaDB (one database per episode)
when the server answers, so that a leaked database is visible. After the last client
has gone, what the server holds (child processes, sandboxes, mounts, cgroups, temp
files, fds, threads, episode databases) is compared with what it held before the first
client; its RSS is sampled along the way.

Speed: DB steps (``SELECT 1`` on SQLite) in-process and through a server over
loopback, with 1 and 32 sessions: steps per second and per-step latency.

``python -m benchmarks.run serving`` writes ``benchmarks/results/serving.md``.
``SERVING_SOAK_EPISODES`` (default 1000, split evenly over the tasks) and
``SERVING_SOAK_BUDGET_S`` (default 1200: the soak stops starting episodes when its time
is spent, and the results say so) size the run.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import platform
import random
import statistics
import subprocess
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import psutil
from openenv.core.generic_client import GenericEnvClient

import agentgym_eppo  # noqa: F401
from agentgym_eppo.serving.process import ServerProcess
from benchmarks.holdings import Holdings, count_holdings, episode_databases, private_environment
from benchmarks.machine import cpu_model
from benchmarks.report import write_generated
from benchmarks.soak import ALL_TASKS, MARIADB_URL, SoakPolicy

RESULTS = Path(__file__).resolve().parent / "results" / "serving.md"
CLIENTS = 8
MAX_TURNS = 6
EPISODES_PER_CONNECTION = 5
ABANDON_EVERY = 10
SETTLE_S = 30.0
RSS_EVERY = 20


# ---------------------------------------------------------------------- soak


@dataclass(frozen=True)
class Footprint(Holdings):
    """What one server process holds (counted by owner, not system-wide)."""

    threads: int
    databases: int


def footprint(
    server: psutil.Process, marker: str, temp_dir: Path, db_url: str | None, since: float
) -> Footprint:
    return Footprint.of(count_holdings(server, marker, temp_dir, {server.pid}, db_url, since))


@dataclass
class TaskSoak:
    task: str
    episodes: int = 0
    abandoned: int = 0
    steps: int = 0
    refused: int = 0
    connections: int = 0
    seconds: float = 0.0
    statuses: Counter[str] = field(default_factory=Counter)
    rss: list[tuple[int, int]] = field(default_factory=list)
    before: Footprint | None = None
    after: Footprint | None = None
    budget_hit: bool = False

    @property
    def leaked(self) -> dict[str, int]:
        assert self.before is not None and self.after is not None
        return self.after.minus(self.before)


def _wire(action: Any) -> dict[str, Any]:
    """A policy's action as an OpenEnv action payload (garbage stays garbage)."""
    if isinstance(action, str):
        return {"text": action}
    if isinstance(action, dict):
        return {"tool_call": action}
    return {"text": repr(action)}


async def _client(
    url: str, slot: int, quota: list[int], report: TaskSoak, deadline: float, server: psutil.Process
) -> None:
    policy = SoakPolicy(seed=slot, expert_share=0.0)
    rng = random.Random(slot)
    while quota[0] > 0 and time.monotonic() < deadline:
        report.connections += 1
        client = GenericEnvClient(base_url=url, message_timeout_s=120)
        await client.connect()
        try:
            for _ in range(EPISODES_PER_CONNECTION):
                if quota[0] <= 0 or time.monotonic() >= deadline:
                    break
                quota[0] -= 1
                result = await client.reset()
                policy.begin(slot, result.observation["info"])
                abandon = rng.randrange(ABANDON_EVERY) == 0
                turns = 0
                while not result.done:
                    if abandon and turns == 1:
                        break
                    action = _wire(policy.act(slot, result.observation["text"]))
                    try:
                        result = await client.step(action)
                    except RuntimeError:  # refused in OpenEnv's error shape; no turn taken
                        report.refused += 1
                        continue
                    report.steps += 1
                    turns += 1
                report.episodes += 1
                if result.done:
                    report.statuses[result.observation["info"]["status"]] += 1
                else:
                    report.abandoned += 1
                    await client._ws.close()  # type: ignore[union-attr]  # no close message
                    client._ws = None
                    break
                if report.episodes % RSS_EVERY == 0:
                    report.rss.append((report.episodes, server.memory_info().rss))
        finally:
            await client.close()


def soak_task(task: str, episodes: int, budget_s: float) -> TaskSoak:
    report = TaskSoak(task)
    marker = f"serving-soak-{os.getpid()}-{task}"
    db_url = _mariadb() if task == "db" else None
    args = ["--port", "0", "--max-sessions", str(CLIENTS), "--env", f"max_turns={MAX_TURNS}"]
    if db_url:
        args += ["--env", f"db_url={db_url}"]
    since = time.time()
    with (
        private_environment(marker) as temp_dir,
        ServerProcess(task, *args, nice=10) as server,
    ):
        process = psutil.Process(server.pid)
        report.before = footprint(process, marker, temp_dir, db_url, since)
        report.rss.append((0, process.memory_info().rss))
        start = time.monotonic()
        quota = [episodes]

        async def run() -> None:
            deadline = start + budget_s
            await asyncio.gather(
                *(_client(server.url, s, quota, report, deadline, process) for s in range(CLIENTS))
            )

        asyncio.run(run())
        report.seconds = time.monotonic() - start
        report.budget_hit = quota[0] > 0
        report.rss.append((report.episodes, process.memory_info().rss))
        deadline = time.monotonic() + SETTLE_S
        while True:
            time.sleep(1.0)
            live = server.sessions()["active_sessions"]
            report.after = footprint(process, marker, temp_dir, db_url, since)
            settled = live == 0 and all(v <= 0 for v in report.leaked.values())
            if settled or time.monotonic() > deadline:
                break
    return report


def _mariadb() -> str | None:
    try:
        episode_databases(MARIADB_URL, time.time())
    except Exception:
        return None
    return MARIADB_URL


# ---------------------------------------------------------------------- speed

SELECT_ONE = {"name": "execute_sql", "arguments": {"query": "SELECT 1"}}
SPEED_ENV = {"max_turns": 1_000_000}


@dataclass
class Speed:
    where: str
    sessions: int
    steps: int
    seconds: float
    latencies: list[float]

    def row(self) -> str:
        lat = sorted(self.latencies)
        p50 = statistics.median(lat) * 1e3
        p95 = lat[int(0.95 * (len(lat) - 1))] * 1e3
        return (
            f"| {self.where} | {self.sessions} | {self.steps} | "
            f"{self.steps / self.seconds:,.0f} | {p50:.2f} | {p95:.2f} |"
        )


def speed_in_process(sessions: int, steps_each: int) -> Speed:
    envs = [gym.make("AgentBench-DB-v0", **SPEED_ENV) for _ in range(sessions)]
    try:
        for index, env in enumerate(envs):
            env.reset(options={"index": index})
        latencies = []
        start = time.perf_counter()
        for _ in range(steps_each):
            for env in envs:  # one thread steps them in turn, as a vector env's worker does
                t = time.perf_counter()
                env.step(SELECT_ONE)
                latencies.append(time.perf_counter() - t)
        seconds = time.perf_counter() - start
    finally:
        for env in envs:
            env.close()
    return Speed("in-process", sessions, sessions * steps_each, seconds, latencies)


def speed_over_loopback(url: str, sessions: int, steps_each: int) -> Speed:
    latencies: list[float] = []

    async def one(index: int, ready: asyncio.Barrier) -> None:
        async with GenericEnvClient(base_url=url) as client:
            await client.reset(index=index)
            await ready.wait()
            for _ in range(steps_each):
                t = time.perf_counter()
                await client.step({"tool_call": SELECT_ONE})
                latencies.append(time.perf_counter() - t)

    async def run() -> float:
        ready = asyncio.Barrier(sessions + 1)
        tasks = [asyncio.create_task(one(i, ready)) for i in range(sessions)]
        await ready.wait()
        start = time.perf_counter()
        await asyncio.gather(*tasks)
        return time.perf_counter() - start

    seconds = asyncio.run(run())
    return Speed(
        "loopback (OpenEnv WebSocket)", sessions, sessions * steps_each, seconds, latencies
    )


def measure_speed() -> list[Speed]:
    results = [speed_in_process(1, 400), speed_in_process(32, 25)]
    args = ["--port", "0", "--max-sessions", "32", "--env", f"max_turns={SPEED_ENV['max_turns']}"]
    with ServerProcess("db", *args) as server:
        speed_over_loopback(server.url, 1, 20)  # warm-up
        results += [
            speed_over_loopback(server.url, 1, 400),
            speed_over_loopback(server.url, 32, 25),
        ]
    return results


# ---------------------------------------------------------------------- report


def _lscpu() -> tuple[str, str]:
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        text = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
        fields = dict(
            (k.strip(), v.strip())
            for k, _, v in (line.partition(":") for line in text.splitlines())
        )
        flags = set(fields.get("Flags", "").split())
        shown = [
            f
            for f in ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512_bf16", "amx_tile")
            if f in flags
        ]
        return fields.get("Model name", cpu_model()), " ".join(shown)
    return cpu_model(), "(lscpu unavailable)"


def write_results(soaks: list[TaskSoak], speeds: list[Speed], wall_s: float, loads: tuple) -> str:
    model, flags = _lscpu()
    total = sum(s.episodes for s in soaks)
    lines = [
        "# OpenEnv servers: soak and speed",
        "",
        "`python -m benchmarks.run serving` (`benchmarks/bench_serving.py`), run under `nice -n 10`.",
        "",
        f"- CPU: {model}, {psutil.cpu_count()} logical cores; flags of note: {flags}",
        f"- Python {platform.python_version()}, {platform.system()} {platform.release()}",
        f"- Machine load (1-min average) at start {loads[0]:.1f}, at end {loads[1]:.1f}"
        + (
            ": other jobs ran on the same cores, so every time below is inflated by "
            "contention and varies from run to run."
            if max(loads) > psutil.cpu_count()
            else "."
        ),
        f"- Wall time of the whole benchmark: {wall_s / 60:.1f} min.",
        "",
        "## Soak",
        "",
        f"{total} episodes over the servers ({CLIENTS} concurrent OpenEnv clients per task, "
        f"episodes cut at {MAX_TURNS} turns, a new connection every {EPISODES_PER_CONNECTION} "
        f"episodes, about one episode in {ABANDON_EVERY} abandoned mid-episode by dropping "
        "the connection without a close). Actions: the soak policy's random valid calls "
        "and garbage (malformed JSON, unknown tools, wrong types, huge or control-character "
        "strings); 'refused' counts actions answered with OpenEnv's error shape.",
        "",
        "| task | episodes | abandoned | steps | refused | connections | seconds | statuses |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for s in soaks:
        statuses = ", ".join(f"{k} {v}" for k, v in s.statuses.most_common())
        lines.append(
            f"| {s.task} | {s.episodes} | {s.abandoned} | {s.steps} | {s.refused} | "
            f"{s.connections} | {s.seconds:.0f} | {statuses} |"
        )
    if any(s.budget_hit for s in soaks):
        cut = ", ".join(s.task for s in soaks if s.budget_hit)
        lines += ["", f"The time budget ran out before the planned episodes on: {cut}."]
    keys = list(vars(soaks[0].before))
    lines += [
        "",
        "What each server held after its last client left, minus what it held before the "
        "first (child processes, bubblewrap sandboxes, agentgym mounts, cgroups, entries in "
        "the private TMPDIR, open fds, threads, MariaDB episode databases):",
        "",
        "| task | " + " | ".join(keys) + " |",
        "|---|" + "---|" * len(keys),
    ]
    for s in soaks:
        lines.append(f"| {s.task} | " + " | ".join(str(s.leaked[k]) for k in keys) + " |")
    lines += [
        "",
        "Server RSS (MiB) over the run: before the first client, after each fifth of the "
        f"episodes (sampled every {RSS_EVERY} episodes), and the largest sample:",
        "",
        "| task | start | 20% | 40% | 60% | 80% | end | max |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for s in soaks:
        mib = [(n, r / 2**20) for n, r in s.rss]
        fifths = [
            next((r for n, r in mib if n >= share * s.episodes), mib[-1][1])
            for share in (0.2, 0.4, 0.6, 0.8)
        ]
        cells = " | ".join(f"{r:.0f}" for r in (mib[0][1], *fifths, mib[-1][1]))
        lines.append(f"| {s.task} | {cells} | {max(r for _, r in mib):.0f} |")
    lines += [
        "",
        "## Speed",
        "",
        "DB steps (`execute_sql` of `SELECT 1` on SQLite). In-process, one thread steps the "
        "envs in turn; over loopback, each session is an OpenEnv WebSocket client in one "
        "asyncio loop and the server is a separate process (one thread per session, as "
        "OpenEnv runs them). Latency is one step's wall time as its caller sees it.",
        "",
        "| where | sessions | steps | steps/s | p50 ms | p95 ms |",
        "|---|---|---|---|---|---|",
        *(s.row() for s in speeds),
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    episodes = int(os.environ.get("SERVING_SOAK_EPISODES", "1000"))
    budget_s = float(os.environ.get("SERVING_SOAK_BUDGET_S", "1200"))
    start = time.monotonic()
    load_start = os.getloadavg()[0]
    soaks = []
    # ALFWorld, the slowest per episode, goes last and gets what the others left
    tasks = sorted(ALL_TASKS, key=lambda task: task == "alfworld")
    for i, task in enumerate(tasks):
        left = budget_s - (time.monotonic() - start)
        share = left / (len(tasks) - i)
        report = soak_task(task, episodes // len(ALL_TASKS), share)
        print(json.dumps({"task": task, "episodes": report.episodes, "leaked": report.leaked}))
        soaks.append(report)
    speeds = measure_speed()
    for s in speeds:
        print(s.row())
    text = write_results(soaks, speeds, time.monotonic() - start, (load_start, os.getloadavg()[0]))
    write_generated(RESULTS, text)
    print(text)


if __name__ == "__main__":
    main()
