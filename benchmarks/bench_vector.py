"""Vector env throughput: env steps per second for 1-16 mixed slots, per back-end.

Two workloads:

The subprocess back-end runs twice: with its default ``spawn`` workers and with
``fork`` workers.

* ``instant``: two tasks whose step costs nothing (``benchmarks/instant_env.py``),
  driven by one fixed tool call, so the numbers are the machinery's own cost. Beside
  ours (serial, subprocess, Ray): the env called directly in a loop (the floor), and
  the peer, Gymnasium's ``SyncVectorEnv``/``AsyncVectorEnv`` over the same envs
  (``NEXT_STEP`` autoreset, stepping every slot every time, as Gymnasium does).
* ``agentbench``: the AgentBench environments registered in this checkout, mixed
  round-robin, each slot played by its own expert inside its worker
  (``EXPERT_ACTION``), against the same experts called directly.

A run steps every running slot together (``step_some``), resets finished slots
(``reset_some``), and counts steps for ``SECONDS`` seconds; the figure is the median
of ``ROUNDS`` runs, the runners taking turns within each round. Per-step overhead =
1/throughput - 1/throughput(direct), 1 slot. The AgentBench workload builds real envs
(seconds each), so it runs fewer sizes and no Ray.

Run: ``python -m benchmarks.run vector``; writes ``benchmarks/results/vector.md``.
"""

from __future__ import annotations

import os
import platform
import statistics
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv

from agentgym_eppo.registration import ENVIRONMENTS, TASK_IDS
from agentgym_eppo.vector import EXPERT_ACTION, MultiTaskVectorEnv
from benchmarks.machine import cpu_model
from benchmarks.report import write_generated

from .instant_env import IDS as INSTANT_IDS
from .instant_env import NOOP_TEXT

RESULTS = Path(__file__).resolve().parent / "results" / "vector.md"
SLOTS = (1, 2, 4, 8, 16)
REAL_SLOTS = (1, 4, 8)
BACKENDS = ("serial", "subprocess", "subprocess-fork", "ray")
"""``subprocess-fork``: the subprocess back-end with ``start_method="fork"``."""
SECONDS = 1.5
ROUNDS = 3


def mixed(ids: list[str], slots: int) -> list[str]:
    return [ids[i % len(ids)] for i in range(slots)]


def timed_steps(step_round: Callable[[], int]) -> float:
    """Steps per second of ``step_round`` (returns the steps it made) over SECONDS."""
    steps, start = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - start) < SECONDS:
        steps += step_round()
    return steps / elapsed


def direct(ids: list[str], slots: int, expert: bool) -> float:
    envs = [gym.make(env_id) for env_id in mixed(ids, slots)]
    for env in envs:
        env.reset(seed=0)

    def step_round() -> int:
        for env in envs:
            action = env.unwrapped.expert_action() if expert else NOOP_TEXT  # type: ignore[attr-defined]
            _, _, terminated, truncated, _ = env.step(action)
            if terminated or truncated:
                env.reset()
        return len(envs)

    try:
        return timed_steps(step_round)
    finally:
        for env in envs:
            env.close()


def ours(ids: list[str], slots: int, backend: str, expert: bool) -> float:
    options = {"start_method": "fork"} if backend == "subprocess-fork" else {}
    venv = MultiTaskVectorEnv(
        mixed(ids, slots), backend=backend.split("-")[0], backend_options=options
    )
    action = EXPERT_ACTION if expert else NOOP_TEXT
    venv.reset(seed=0)

    def step_round() -> int:
        running = [int(i) for i in np.flatnonzero(venv.running)]
        outcomes = venv.step_some(running, [action] * len(running))
        finished = [o.index for o in outcomes if o.done]
        if finished:
            venv.reset_some(finished)
        return len(running)

    try:
        return timed_steps(step_round)
    finally:
        venv.close()


def gymnasium_peer(ids: list[str], slots: int, kind: str) -> float:
    fns = [lambda env_id=env_id: gym.make(env_id) for env_id in mixed(ids, slots)]
    if kind == "sync":
        venv: Any = SyncVectorEnv(fns, autoreset_mode=AutoresetMode.NEXT_STEP)
    else:
        venv = AsyncVectorEnv(fns, shared_memory=False, autoreset_mode=AutoresetMode.NEXT_STEP)
    venv.reset(seed=0)
    actions = tuple([NOOP_TEXT] * slots)

    def step_round() -> int:
        venv.step(actions)
        return slots

    try:
        return timed_steps(step_round)
    finally:
        venv.close()


def ray_available() -> bool:
    try:
        import ray  # noqa: F401
    except ImportError:
        return False
    return True


def measure_workload(
    ids: list[str], expert: bool, peers: bool, slots: tuple[int, ...], rounds: int, with_ray: bool
) -> dict[str, dict[int, float]]:
    """Medians per runner and slot count. The runners take turns within each round, so
    that the load of a shared machine falls on all of them alike; Ray runs last, alone
    with its runtime (which would slow the others)."""
    runners: dict[str, Callable[[int], float]] = {
        "direct (no vector env)": lambda n: direct(ids, n, expert),
        "ours, serial": lambda n: ours(ids, n, "serial", expert),
        "ours, subprocess": lambda n: ours(ids, n, "subprocess", expert),
        "ours, subprocess-fork": lambda n: ours(ids, n, "subprocess-fork", expert),
    }
    if peers:
        runners["Gymnasium SyncVectorEnv"] = lambda n: gymnasium_peer(ids, n, "sync")
        runners["Gymnasium AsyncVectorEnv"] = lambda n: gymnasium_peer(ids, n, "async")
    rows = interleaved_medians(runners, slots, rounds)
    if with_ray and ray_available():
        import ray

        ray.init(num_cpus=os.cpu_count() or 1, include_dashboard=False, log_to_driver=False)
        try:
            ray_runner = {"ours, ray": lambda n: ours(ids, n, "ray", expert)}
            rows.update(interleaved_medians(ray_runner, slots, rounds))
        finally:
            ray.shutdown()
    return rows


def interleaved_medians(
    runners: dict[str, Callable[[int], float]], slots: tuple[int, ...], rounds: int
) -> dict[str, dict[int, float]]:
    rows: dict[str, dict[int, float]] = {name: {} for name in runners}
    for n in slots:
        rates: dict[str, list[float]] = {name: [] for name in runners}
        for _ in range(rounds):
            for name, runner in runners.items():
                rates[name].append(runner(n))
        for name in runners:
            rows[name][n] = statistics.median(rates[name])
            print(f"  {n:2d} slots: {name} {rows[name][n]:,.0f}/s", flush=True)
    return rows


def table(rows: dict[str, dict[int, float]]) -> list[str]:
    sizes = sorted(next(iter(rows.values())))
    lines = ["| runner | " + " | ".join(f"{n} slot{'s' * (n > 1)}" for n in sizes) + " |"]
    lines.append("|---|" + "---:|" * len(sizes))
    for name, rates in rows.items():
        lines.append(f"| {name} | " + " | ".join(f"{rates[n]:,.0f}" for n in sizes) + " |")
    floor = rows["direct (no vector env)"][1]
    lines.append("")
    lines.append("Per-step overhead against calling the env directly (1 slot):")
    lines.append("")
    for name, rates in rows.items():
        if name.startswith("direct"):
            continue
        overhead_us = (1 / rates[1] - 1 / floor) * 1e6
        if overhead_us <= 0:
            lines.append(f"- {name}: none measurable (faster than the direct run: noise)")
            continue
        lines.append(
            f"- {name}: {overhead_us:,.0f} µs per step ({floor / rates[1]:.1f}x the direct time)"
        )
    return lines


def main() -> None:
    load_before = os.getloadavg()[0]
    sections: list[str] = []
    print("instant workload", flush=True)
    instant = measure_workload(
        list(INSTANT_IDS), expert=False, peers=True, slots=SLOTS, rounds=ROUNDS, with_ray=True
    )
    sections += [
        "## Instant envs (the machinery's own cost)",
        "",
        "Env steps per second (median of "
        f"{ROUNDS} runs of {SECONDS} s); two instant tasks mixed round-robin.",
        "",
        *table(instant),
        "",
    ]
    real = list(TASK_IDS)
    if real:
        print(f"agentbench workload: {real}", flush=True)
        ids = [ENVIRONMENTS[task].env_id for task in real]
        agentbench = measure_workload(
            ids, expert=True, peers=False, slots=REAL_SLOTS, rounds=ROUNDS, with_ray=False
        )
        sections += [
            f"## AgentBench envs ({', '.join(real)}), experts acting",
            "",
            "Env steps per second; slots cycle over the tasks; each expert acts inside its worker.",
            "",
            *table(agentbench),
            "",
        ]
    else:
        sections += [
            "## AgentBench envs",
            "",
            "No AgentBench environment is registered in this checkout.",
            "",
        ]
    header = [
        "# Vector env throughput",
        "",
        f"Date: {datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}. Machine: {os.cpu_count()} cores "
        f"({cpu_model()}), shared with other work; Python {platform.python_version()}, "
        f"gymnasium {gym.__version__}. Command: `python -m benchmarks.run vector`. "
        f"Load average (1 min) {load_before:.1f} at the start, {os.getloadavg()[0]:.1f} at the "
        "end: other work shared the cores, so single figures are noisy.",
        "",
    ]
    write_generated(RESULTS, "\n".join(header + sections))
    print(f"wrote {RESULTS}")
