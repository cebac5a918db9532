"""KG backends side by side: graph load time and latency per tool call.

Backends: the embedded pyoxigraph store (our default), rdflib (the pure-Python
store), and SPARQL endpoints on loopback reached over HTTP: Oxigraph's server and,
when installed, OpenLink Virtuoso (AgentBench's own Freebase server).
Every backend answers the same queries (one query builder), so the numbers compare
stores, not query plans. Latency is measured end to end through ``env.step``, on the
expert's episodes of the shipped dev questions (rdflib on a subset: it is slow).

``python -m benchmarks.run kg`` writes ``benchmarks/results/kg.md``.
"""

from __future__ import annotations

import os
import platform
import re
import statistics
import subprocess
import time
from collections import defaultdict
from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

from agentgym_eppo.environments.kg import KGEnv
from agentgym_eppo.environments.kg.server import (
    oxigraph_binary,
    serve_graph,
    serve_graph_with_virtuoso,
    virtuoso_binaries,
)
from agentgym_eppo.environments.kg.store import OxigraphStore, RdflibStore
from agentgym_eppo.environments.kg.tasks import shipped_graph_path
from benchmarks.report import write_generated

RESULTS = Path(__file__).resolve().parent / "results" / "kg.md"
RDFLIB_QUESTIONS = 40


def _timed(action: Callable[[], object]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def _tool_latencies(env: KGEnv, questions: int) -> dict[str, list[float]]:
    """Seconds per ``env.step``, by tool, over the expert's episodes of ``questions`` questions."""
    latencies: dict[str, list[float]] = defaultdict(list)
    for index in range(questions):
        env.reset(options={"index": index})
        while True:
            action = env.expert_action()
            started = time.perf_counter()
            _, _, terminated, truncated, _ = env.step(action)
            latencies[action["name"]].append(time.perf_counter() - started)
            if terminated or truncated:
                break
    return latencies


def main() -> None:
    graph = shipped_graph_path()
    triples = len(OxigraphStore.from_file(graph))
    load = {
        "pyoxigraph (embedded)": [_timed(lambda: OxigraphStore.from_file(graph)) for _ in range(5)],
        "rdflib (embedded)": [_timed(lambda: RdflibStore.from_file(graph)) for _ in range(2)],
    }
    envs = {
        "pyoxigraph (embedded)": (KGEnv(split="dev"), 200),
        "rdflib (embedded)": (KGEnv(split="dev", store="rdflib"), RDFLIB_QUESTIONS),
    }
    latencies = {name: _tool_latencies(env, count) for name, (env, count) in envs.items()}
    questions = {name: count for name, (_, count) in envs.items()}
    servers: dict[str, Callable[[], AbstractContextManager[str]]] = {}
    binary = oxigraph_binary()
    if binary is not None:
        servers["Oxigraph server (HTTP)"] = lambda: serve_graph(graph, binary=binary)
    if virtuoso_binaries() is not None:
        servers["Virtuoso 7 (HTTP)"] = lambda: serve_graph_with_virtuoso(graph)
    for name, serve in servers.items():
        load[name] = []
        for _ in range(3):
            started = time.perf_counter()
            with serve():
                load[name].append(time.perf_counter() - started)
        with serve() as url:
            latencies[name] = _tool_latencies(KGEnv(split="dev", sparql_endpoint=url), 200)
        questions[name] = 200
    write_generated(RESULTS, _report(triples, load, latencies, questions))
    print(RESULTS.read_text())


def _virtuoso_version() -> str:
    binaries = virtuoso_binaries()
    if binaries is None:
        return ""
    banner = subprocess.run([binaries[0], "+help"], capture_output=True, text=True, check=False)
    found = re.search(r"Version (\S+)", banner.stdout + banner.stderr)
    return f", Virtuoso {found.group(1)}" if found else ", Virtuoso"


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.3f}"


def _report(
    triples: int,
    load: dict[str, list[float]],
    latencies: dict[str, dict[str, list[float]]],
    questions: dict[str, int],
) -> str:
    baseline = "pyoxigraph (embedded)"
    tools = sorted({tool for per_tool in latencies.values() for tool in per_tool})
    versions = (
        ", ".join(
            f"{package} {metadata.version(package)}"
            for package in ("pyoxigraph", "rdflib", "oxigraph")
        )
        + _virtuoso_version()
    )
    lines = [
        "# KG backends: load time and latency per tool call",
        "",
        f"- Date: {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC",
        f"- Machine: {platform.machine()}, {os.cpu_count()} CPUs (shared), "
        f"{platform.system()} {platform.release()}, Python {platform.python_version()}",
        f"- Libraries: {versions}",
        f"- Graph: the shipped `freebase_mini.nt.gz`, {triples:,} triples",
        "- Command: `python -m benchmarks.run kg`",
        "",
        "## Graph load time (median seconds)",
        "",
        "| backend | runs | median s | ratio to pyoxigraph |",
        "|---|---|---|---|",
    ]
    base_load = statistics.median(load[baseline])
    for name, runs in load.items():
        median = statistics.median(runs)
        lines.append(f"| {name} | {len(runs)} | {median:.3f} | {median / base_load:.1f}x |")
    lines += [
        "",
        "For a server: start it, wait until it answers, load the graph (Oxigraph: upload over",
        "HTTP into memory; Virtuoso: create a fresh database, then its bulk loader `ld_dir` +",
        "`rdf_loader_run`). Both listen on loopback only.",
        "",
        "## Latency per tool call through `env.step` (median milliseconds)",
        "",
        "Expert episodes of the dev questions ("
        + ", ".join(f"{name}: {count}" for name, count in questions.items())
        + " questions).",
        "",
        "`get_neighbors`, `intersection`, `argmax`, `argmin` and `count` build a program and query",
        "nothing (AgentBench's lazy variables; `get_neighbors` only looks up the relation's range",
        "once per relation): the stores' work shows in `get_relations`, `get_attributes` and",
        "`final_answer`, which evaluate the programs.",
        "",
        "| tool | " + " | ".join(latencies) + " |",
        "|---|" + "---|" * len(latencies),
    ]
    for tool in [*tools, "all calls"]:
        cells = []
        for per_tool in latencies.values():
            samples = (
                [value for values in per_tool.values() for value in values]
                if tool == "all calls"
                else per_tool.get(tool, [])
            )
            cells.append(_ms(statistics.median(samples)) if samples else "-")
        lines.append(f"| {tool} | " + " | ".join(cells) + " |")
    overall = {
        name: statistics.median([value for values in per_tool.values() for value in values])
        for name, per_tool in latencies.items()
    }
    lines += [
        "",
        "Median over all calls, as a multiple of pyoxigraph's: "
        + ", ".join(f"{name} {value / overall[baseline]:.1f}x" for name, value in overall.items())
        + ".",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
