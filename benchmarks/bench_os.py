"""OS sandbox latency: ours (bubblewrap, Docker with a persistent shell) against
AgentBench's way (``docker exec`` per command, a new container per episode).

Measured, medians over repeated runs:

* per-command latency of ``true`` (the protocol's overhead: the command itself is free);
* episode start (a sandbox whose shell answers) and teardown, cold;
* episode start as ``reset`` sees it with a prestarted sandbox (bubblewrap, the default).

Writes ``benchmarks/results/os.md``. Docker rows are left out, with the reason, when no
engine or image is available.
"""

from __future__ import annotations

import datetime
import os
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from agentgym_eppo.environments.os.env import OSEnv
from agentgym_eppo.environments.os.sandbox import SandboxError
from agentgym_eppo.environments.os.sandbox_bwrap import BwrapSandbox, bwrap_available
from benchmarks.report import write_generated

RESULTS = Path(__file__).resolve().parent / "results" / "os.md"
IMAGE = "local-os/default"
TASK = {"description": "Say done.", "evaluation": {"match": "done"}}


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1e3


def timed(action: Callable[[], object], repeat: int) -> list[float]:
    samples = []
    for _ in range(repeat):
        begin = time.perf_counter()
        action()
        samples.append(time.perf_counter() - begin)
    return samples


def bench_bwrap(rows: list[tuple[str, str, float]]) -> None:
    starts, stops = [], []
    for _ in range(30):
        begin = time.perf_counter()
        box = BwrapSandbox()
        starts.append(time.perf_counter() - begin)
        begin = time.perf_counter()
        box.close()
        stops.append(time.perf_counter() - begin)
    rows.append(("bubblewrap (ours)", "episode start, cold", median_ms(starts)))
    rows.append(("bubblewrap (ours)", "episode teardown", median_ms(stops)))
    with BwrapSandbox() as box:
        rows.append(
            (
                "bubblewrap (ours)",
                "per command (`true`)",
                median_ms(timed(lambda: box.run_command("true", 10), 1000)),
            )
        )
    env = OSEnv([TASK])
    env.reset(options={"index": 0})
    time.sleep(0.5)
    resets = []
    for _ in range(30):
        env.step({"name": "answer_action", "arguments": {"answer": "done"}})
        time.sleep(0.3)  # an episode's worth of time for the reserve to boot
        begin = time.perf_counter()
        env.reset(options={"index": 0})
        env.unwrapped.sandbox.ensure_ready()
        resets.append(time.perf_counter() - begin)
    env.close()
    rows.append(("bubblewrap (ours)", "episode start, prestarted (`reset`)", median_ms(resets)))


def bench_docker(rows: list[tuple[str, str, float]], notes: list[str]) -> None:
    try:
        from agentgym_eppo.environments.os.sandbox_docker import DockerSandbox, docker_client

        client = docker_client()
        client.images.get(IMAGE)
    except Exception as error:
        notes.append(f"Docker rows absent: {error}")
        return
    starts, stops = [], []
    for _ in range(10):
        begin = time.perf_counter()
        box = DockerSandbox(image=IMAGE, client=client)
        starts.append(time.perf_counter() - begin)
        begin = time.perf_counter()
        box.close()
        stops.append(time.perf_counter() - begin)
    rows.append(("Docker (ours)", "episode start, cold", median_ms(starts)))
    rows.append(("Docker (ours)", "episode teardown", median_ms(stops)))
    box = DockerSandbox(image=IMAGE, client=client)
    rows.append(
        (
            "Docker (ours)",
            "per command (`true`)",
            median_ms(timed(lambda: box.run_command("true", 10), 300)),
        )
    )
    rows.append(
        (
            "AgentBench's way",
            "per command (`docker exec bash -c true`)",
            median_ms(timed(lambda: box.container.exec_run(["bash", "-c", "true"]), 50)),
        )
    )
    box.close()
    starts, stops = [], []
    for _ in range(3):
        begin = time.perf_counter()
        container = client.containers.run(
            IMAGE, detach=True, tty=True, stdin_open=True, remove=True
        )
        exec_id = client.api.exec_create(container.id, "bash --login", stdin=True, tty=True)["Id"]
        client.api.exec_start(exec_id, socket=True)._sock.close()
        starts.append(time.perf_counter() - begin)
        begin = time.perf_counter()
        container.stop()
        stops.append(time.perf_counter() - begin)
    rows.append(
        ("AgentBench's way", "episode start (`run` + `exec bash --login`)", median_ms(starts))
    )
    rows.append(
        ("AgentBench's way", "episode teardown (`stop`, as its Container does)", median_ms(stops))
    )


def machine() -> str:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    return (
        f"{platform.node()}: {os.cpu_count()} cores ({cpu}), Linux {platform.release()}, "
        f"load average {load} at the end of the run"
    )


def main() -> None:
    reason = bwrap_available()
    if reason:
        raise SandboxError(f"the OS benchmark needs the bubblewrap backend: {reason}")
    rows: list[tuple[str, str, float]] = []
    notes: list[str] = []
    bench_bwrap(rows)
    bench_docker(rows, notes)
    values = {(backend, what): ms for backend, what, ms in rows}
    lines = [
        "# OS sandbox latency",
        "",
        f"- date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC",
        f"- machine: {machine()}; shared with other jobs, so medians",
        "- command: `python -m benchmarks.run os`",
        "",
        "| backend | measurement | median (ms) |",
        "|---|---|---:|",
        *[f"| {backend} | {what} | {ms:.3f} |" for backend, what, ms in rows],
        "",
    ]
    ours = values[("bubblewrap (ours)", "per command (`true`)")]
    exec_key = ("AgentBench's way", "per command (`docker exec bash -c true`)")
    if exec_key in values:
        start_key = ("AgentBench's way", "episode start (`run` + `exec bash --login`)")
        lines += [
            "Ratios (AgentBench's way / ours):",
            "",
            f"- per command: {values[exec_key] / ours:.0f}x slower than bubblewrap, "
            f"{values[exec_key] / values[('Docker (ours)', 'per command (`true`)')]:.0f}x slower "
            "than our Docker shell",
            f"- episode start: {values[start_key] / values[('bubblewrap (ours)', 'episode start, cold')]:.0f}x "
            "slower than a cold bubblewrap start",
            "",
        ]
    lines += [f"- {note}" for note in notes]
    write_generated(RESULTS, "\n".join(lines).rstrip())
    print("\n".join(lines))


if __name__ == "__main__":
    main()
