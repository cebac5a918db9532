"""Serve a graph file from a real SPARQL server on loopback (Oxigraph's ``oxigraph serve``).

For tests, benchmarks, and anyone who wants the shipped graph behind an HTTP SPARQL
endpoint (AgentBench's own KG worker can then query it too)::

    with serve_graph(shipped_graph_path()) as url:
        env = gym.make("AgentBench-KG-v0", sparql_endpoint=url)

The server is the ``oxigraph`` wheel's binary (dev extra), in memory; the graph is
uploaded over the SPARQL 1.1 Graph Store protocol. The server stops when the block ends.
"""

from __future__ import annotations

import contextlib
import gzip
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path


def oxigraph_binary() -> str | None:
    """The ``oxigraph`` CLI beside this Python (a virtualenv's bin) or on ``PATH``; None if absent."""
    beside = Path(sys.executable).parent / "oxigraph"
    return str(beside) if beside.is_file() else shutil.which("oxigraph")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def serve_graph(
    graph_file: str | Path, *, binary: str | None = None, startup_timeout: float = 30.0
) -> Iterator[str]:
    """Start ``oxigraph serve`` on a free loopback port, load ``graph_file``, yield the query URL.

    ``graph_file`` is N-Triples (optionally gzipped). Raises ``FileNotFoundError`` if
    no ``oxigraph`` binary is found and ``RuntimeError`` if the server does not start.
    """
    binary = binary or oxigraph_binary()
    if binary is None:
        raise FileNotFoundError("no oxigraph server binary: pip install oxigraph")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    process = subprocess.Popen(
        [binary, "serve", "--bind", f"127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        _wait_until_up(base, process, startup_timeout)
        path = Path(graph_file)
        data = path.read_bytes()
        if path.name.endswith(".gz"):
            data = gzip.decompress(data)
        upload = urllib.request.Request(
            f"{base}/store?default",
            data=data,
            headers={"Content-Type": "application/n-triples"},
            method="POST",
        )
        with urllib.request.urlopen(upload, timeout=300):
            pass
        yield f"{base}/query"
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        if process.stderr is not None:
            process.stderr.close()


def _wait_until_up(base: str, process: subprocess.Popen[bytes], limit: float) -> None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if process.poll() is not None:
            stderr = process.stderr.read().decode(errors="replace") if process.stderr else ""
            raise RuntimeError(f"oxigraph serve exited with {process.returncode}: {stderr}")
        try:
            with urllib.request.urlopen(f"{base}/query?query=ASK%7B%7D", timeout=2):
                return
        except (urllib.error.URLError, ConnectionError):
            time.sleep(0.05)
    raise RuntimeError(f"oxigraph serve did not come up on {base} within {limit} s")
