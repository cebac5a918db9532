"""Reliability figures: the long fuzz run and the 10,000-episode soak.

``python -m benchmarks.run reliability`` runs both; ``python -m benchmarks.bench_reliability
fuzz`` or ``... soak`` runs one (the soak takes about an hour on two shared cores; run it
with ``nice``). Each part saves its figures as JSON in ``benchmarks/results/reliability/``,
and the figures page there, ``figures.md``, is rebuilt from whichever parts have figures,
so the two can run at different times. The report, ``benchmarks/results/reliability.md``
(the attacks tried and their outcomes, kept by hand), links to it.

Peer column: AgentBench has no fuzzing or soak of its own to compare with; the fuzz
table compares our parser with AgentBench's way of reading a function call (take the
first tool call of the message, ``json.loads`` its arguments), run on the same inputs.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.report import write_generated

HERE = Path(__file__).resolve().parent
FOLDER = HERE / "results" / "reliability"
REPORT = FOLDER / "figures.md"
SOAK_JSON = FOLDER / "soak.json"
FUZZ_JSON = FOLDER / "fuzz.json"

SOAK_EPISODES = 10_000
SOAK_BUDGET_S = 85 * 60
RSS_BOUND_BYTES = 64 << 20
"""Allowed growth of the soak processes' total RSS after the first 1,000 episodes."""
WARM_UP_EPISODES = 1_000


def _machine() -> str:
    cores = os.cpu_count()
    return f"{platform.machine()}, {cores} cores (shared), Python {platform.python_version()}"


def _git_commit() -> str:
    import subprocess

    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=HERE,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def run_soak_part(episodes: int = SOAK_EPISODES, budget_s: float = SOAK_BUDGET_S) -> None:
    from benchmarks.soak import MARIADB_URL, run_soak

    started = time.monotonic()
    stamp = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")

    def progress(done: int, total: int) -> None:
        if done % 500 == 0:
            print(f"soak: {done}/{total} episodes, {time.monotonic() - started:.0f} s", flush=True)

    report = run_soak(
        episodes,
        db_url=MARIADB_URL,
        sample_every=100,
        progress=progress,
        budget_s=budget_s,
        drain=False,
    )
    figures = {
        "date": stamp,
        "machine": _machine(),
        "commit": _git_commit(),
        "target_episodes": episodes,
        "episodes": report.episodes,
        "steps": report.steps,
        "seconds": report.seconds,
        "slots": report.slots,
        "statuses": report.statuses,
        "garbage_actions": report.garbage_actions,
        "worker_restarts": report.worker_restarts,
        "before": vars(report.before),
        "after": vars(report.after),
        "leaked": report.leaked,
        "leftover_processes": report.leftover_processes,
        "rss_samples": report.rss_samples,
        "rss_growth_after_warm_up": report.rss_growth(WARM_UP_EPISODES),
        "rss_bound": RSS_BOUND_BYTES,
    }
    SOAK_JSON.write_text(json.dumps(figures, indent=1) + "\n")
    write_report()


def run_fuzz_part() -> None:
    from benchmarks.fuzz_tools import run_fuzz

    stamp = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    figures = {"date": stamp, "machine": _machine(), "commit": _git_commit(), **run_fuzz()}
    FUZZ_JSON.write_text(json.dumps(figures, indent=1) + "\n")
    write_report()


# ---------------------------------------------------------------------- the report


def _mib(value: float) -> str:
    return f"{value / (1 << 20):+.1f} MiB"


def _soak_section(s: dict[str, Any]) -> list[str]:
    lines = [
        "## Soak: all five tasks in one MultiTaskVectorEnv",
        "",
        f"Run {s['date']} on {s['machine']}, commit {s['commit']}. {s.get('note', '')} "
        f"Slots: {s['slots']} (subprocess workers, one per slot); DB on MariaDB "
        "(127.0.0.1:3306), the other tasks on their embedded backends; dev split.",
        "Policy: 30% of episodes played by the task's expert, the rest by schema-valid calls "
        "of a random tool with arguments drawn from the task's phrases and the observation; "
        "10% of all actions garbage (malformed JSON, unknown tools, wrong types, huge or "
        "control-character strings, several calls, bytes, non-strings). Slots step "
        "independently (`submit_steps`/`collect_steps`), so fast tasks play more episodes "
        "than slow ones while, say, an OS command waits out its 30 s limit.",
        "",
        f"- Episodes: **{s['episodes']:,}** of {s['target_episodes']:,} targeted "
        f"({s['steps']:,} steps, {s['garbage_actions']:,} garbage actions) in "
        f"{s['seconds'] / 60:.1f} min ({s['episodes'] / max(s['seconds'], 1e-9):.2f} "
        "episodes/s).",
        f"- Escaped exceptions: 0 (the run would have stopped); worker restarts: "
        f"{s['worker_restarts']}.",
        "",
        "| task | " + " | ".join(_status_columns(s)) + " |",
        "|---|" + "---|" * len(_status_columns(s)),
    ]
    for task, counts in s["statuses"].items():
        cells = [str(counts.get(status, 0)) for status in _status_columns(s)]
        lines.append(f"| {task} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "The soak closes the vector env while its last steps still run, as an interrupted "
        "program would (`drain=False`); a worker busy past its 10 s graceful stop is killed "
        "(see docs/reliability.md for what that leaves). "
        "What the soak's processes held before the vector env started and after it closed "
        "(counted by owner: processes by an environment marker every child inherits, temp "
        "files in the soak's private TMPDIR, cgroups by the owning worker pids, MariaDB "
        "databases and users by the creation time in their names):",
        "",
        "| resource | before | after | leaked |",
        "|---|---|---|---|",
    ]
    for key, value in s["leaked"].items():
        lines.append(f"| {key} | {s['before'][key]} | {s['after'][key]} | {value:+d} |")
    growth = s["rss_growth_after_warm_up"]
    verdict = "within" if growth["all"] <= s["rss_bound"] else "OVER"
    first, last = s["rss_samples"][0], s["rss_samples"][-1]
    lines += [
        "",
        "Processes still alive after the close: "
        + (", ".join(s["leftover_processes"]) or "none")
        + " (multiprocessing's resource tracker is one per parent process, started before "
        "the first snapshot and gone when the parent exits; it is not counted above).",
        "",
        f"Memory (RSS) of the soak process and its workers: {sum(first[1].values()) / 2**20:.0f}"
        f" MiB after {first[0]} episodes, {sum(last[1].values()) / 2**20:.0f} MiB after "
        f"{last[0]}. Growth after the first {WARM_UP_EPISODES:,} episodes: {_mib(growth['all'])}"
        f" in all, **{verdict}** the bound stated before the run ({_mib(s['rss_bound'])}); "
        "per owner:",
        "",
        "| owner | RSS at the last sample | growth after warm-up | growth over the second half |",
        "|---|---|---|---|",
    ]
    half = next(rss for done, rss in s["rss_samples"] if done >= last[0] // 2)
    for owner, value in last[1].items():
        lines.append(
            f"| {owner} | {value / 2**20:.0f} MiB | {_mib(growth.get(owner, 0))} | "
            f"{_mib(value - half.get(owner, 0))} |"
        )
    lines.append("")
    return lines


def _status_columns(s: dict[str, Any]) -> list[str]:
    seen: list[str] = []
    for counts in s["statuses"].values():
        seen += [status for status in counts if status not in seen]
    return sorted(seen)


def _fuzz_section(f: dict[str, Any]) -> list[str]:
    lines = [
        "## Fuzzing every tool of the five environments",
        "",
        f"Run {f['date']} on {f['machine']}, commit {f['commit']}. {f.get('note', '')}",
        "Generator: hypothesis strategies of `benchmarks/fuzz_tools.py` (malformed JSON, "
        "wrong types, huge strings, deep nesting, control characters, lone surrogates, "
        "several calls in one message, bytes and non-string actions), seeded.",
        "",
        "Parser (`parse_function_call` with each env's own tools): every input must give a "
        "validated call or a `ToolCallError`. Peer column: a naive reader in the style of "
        "AgentBench's function-calling agents (the first tool call of the message, "
        "`json.loads` of its arguments, each required argument read by key, nothing caught; "
        "`agentbench_style_parse` in `benchmarks/fuzz_tools.py`, not AgentBench's code) on "
        "the same inputs: how many inputs would raise out of it.",
        "",
        "| env | inputs | valid calls | invalid action | validation failed | escaped "
        "(ours) | escaped (AgentBench-style) | µs/input |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for env, row in f["parser"].items():
        lines.append(
            f"| {env} | {row['inputs']:,} | {row['valid']:,} | {row['invalid_action']:,} | "
            f"{row['validation_failed']:,} | {row['escaped']} | {row['peer_escaped']:,} | "
            f"{row['us_per_input']:.1f} |"
        )
    lines += [
        "",
        "`step` on the real environments (one env per task, reset whenever an episode "
        "ends; invalid_action alternating abort/feedback): every step must return an "
        "observation and a documented status with the documented reward; a step that "
        "raises or breaks that counts as escaped. The slowest step includes the reset "
        "before it.",
        "",
        "| env | steps | episodes | statuses | escaped | slowest step |",
        "|---|---|---|---|---|---|",
    ]
    for env, row in f["step"].items():
        statuses = ", ".join(f"{k} {v}" for k, v in sorted(row["statuses"].items()))
        lines.append(
            f"| {env} | {row['steps']:,} | {row['episodes']:,} | {statuses} | "
            f"{row['escaped']} | {row['slowest_s']:.2f} s |"
        )
    if f.get("absent"):
        lines += ["", "Absent: " + "; ".join(f"{k} ({v})" for k, v in f["absent"].items())]
    lines.append("")
    return lines


def write_report() -> None:
    lines = [
        "# Reliability figures: fuzzing and soak",
        "",
        "Produced by `python -m benchmarks.run reliability` (`benchmarks/bench_reliability.py`);",
        "the tests in `tests/test_reliability_*.py` check the same properties on short runs.",
        "",
    ]
    if FUZZ_JSON.exists():
        lines += _fuzz_section(json.loads(FUZZ_JSON.read_text()))
    else:
        lines += ["## Fuzzing", "", "Not run yet.", ""]
    if SOAK_JSON.exists():
        lines += _soak_section(json.loads(SOAK_JSON.read_text()))
    else:
        lines += ["## Soak", "", "Not run yet.", ""]
    write_generated(REPORT, "\n".join(lines))


def main(parts: list[str] | None = None) -> None:
    parts = parts or ["fuzz", "soak"]
    if "fuzz" in parts:
        run_fuzz_part()
    if "soak" in parts:
        run_soak_part()


if __name__ == "__main__":
    main(sys.argv[1:])
