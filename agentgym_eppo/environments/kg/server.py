"""Serve a graph file from a real SPARQL server on loopback: Oxigraph's or Virtuoso.

For tests, benchmarks, and anyone who wants the shipped graph behind an HTTP SPARQL
endpoint (AgentBench's own KG worker can then query it too)::

    with serve_graph(shipped_graph_path()) as url:
        env = gym.make("AgentBench-KG-v0", sparql_endpoint=url)

* :func:`serve_graph`: the ``oxigraph`` wheel's server (dev extra), in memory; the graph
  is uploaded over the SPARQL 1.1 Graph Store protocol. Starts in well under a second.
* :func:`serve_graph_with_virtuoso`: OpenLink Virtuoso (Debian's
  ``virtuoso-opensource-7-bin``), AgentBench's own Freebase server, in a fresh database
  in a temporary folder, loaded with its bulk loader. Starts in ~15 s.

Each server listens on free loopback ports only and stops when the ``with`` block ends.
"""

from __future__ import annotations

import contextlib
import gzip
import shutil
import socket
import subprocess
import sys
import tempfile
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
        _stop(process)


def virtuoso_binaries() -> tuple[str, str] | None:
    """Virtuoso's server and its ``isql`` client (Debian names them ``-t`` and ``-vt``), or None."""
    server = shutil.which("virtuoso-t")
    client = shutil.which("isql-vt") or shutil.which("isql")
    return (server, client) if server and client else None


_VIRTUOSO_INI = """[Database]
DatabaseFile = {dir}/virtuoso.db
ErrorLogFile = {dir}/virtuoso.log
LockFile = {dir}/virtuoso.lck
TransactionFile = {dir}/virtuoso.trx
xa_persistent_file = {dir}/virtuoso.pxa
Striping = 0
TempStorage = TempDatabase

[TempDatabase]
DatabaseFile = {dir}/virtuoso-temp.db
TransactionFile = {dir}/virtuoso-temp.trx
Striping = 0

[Parameters]
ServerPort = 127.0.0.1:{sql_port}
DirsAllowed = ., {dir}
NumberOfBuffers = 20000
MaxDirtyBuffers = 15000
CheckpointInterval = 0

[HTTPServer]
ServerPort = 127.0.0.1:{http_port}
ServerThreads = 4
MaxClientConnections = 4

[SPARQL]
ResultSetMaxRows = 1000000
MaxQueryExecutionTime = 120
"""


@contextlib.contextmanager
def serve_graph_with_virtuoso(
    graph_file: str | Path,
    *,
    graph_iri: str = "http://agentgym-eppo.dev/kg",
    startup_timeout: float = 120.0,
) -> Iterator[str]:
    """Start Virtuoso on free loopback ports, bulk-load ``graph_file``, yield its ``/sparql`` URL.

    Raises ``FileNotFoundError`` without Virtuoso (``apt-get install
    virtuoso-opensource-7-bin``) and ``RuntimeError`` if it does not start or load.
    """
    binaries = virtuoso_binaries()
    if binaries is None:
        raise FileNotFoundError("no Virtuoso: apt-get install virtuoso-opensource-7-bin")
    server, client = binaries
    with tempfile.TemporaryDirectory(prefix="kg-virtuoso-") as folder:
        sql_port, http_port = free_port(), free_port()
        ini = Path(folder) / "virtuoso.ini"
        ini.write_text(_VIRTUOSO_INI.format(dir=folder, sql_port=sql_port, http_port=http_port))
        path = Path(graph_file)
        data = path.read_bytes()
        (Path(folder) / "graph.nt").write_bytes(
            gzip.decompress(data) if path.name.endswith(".gz") else data
        )
        process = subprocess.Popen(
            [server, "+configfile", str(ini), "+foreground"],
            cwd=folder,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        base = f"http://127.0.0.1:{http_port}"
        try:
            _wait_until_up(base, process, startup_timeout, path="/sparql", name="virtuoso-t")
            load = (
                f"ld_dir('{folder}', 'graph.nt', '{graph_iri}'); rdf_loader_run(); "
                "SELECT ll_error FROM DB.DBA.load_list WHERE ll_error IS NOT NULL;"
            )
            result = subprocess.run(
                [client, f"127.0.0.1:{sql_port}", "dba", "dba", f"exec={load}"],
                capture_output=True,
                text=True,
                timeout=startup_timeout,
                check=False,
            )
            if result.returncode != 0 or "0 Rows." not in result.stdout:
                raise RuntimeError(
                    f"Virtuoso could not load {path}: {result.stdout}{result.stderr}"
                )
            yield f"{base}/sparql"
        finally:
            _stop(process)


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)
    if process.stderr is not None:
        process.stderr.close()


def _wait_until_up(
    base: str,
    process: subprocess.Popen[bytes],
    limit: float,
    *,
    path: str = "/query",
    name: str = "oxigraph serve",
) -> None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if process.poll() is not None:
            stderr = process.stderr.read().decode(errors="replace") if process.stderr else ""
            raise RuntimeError(f"{name} exited with {process.returncode}: {stderr}")
        try:
            with urllib.request.urlopen(f"{base}{path}?query=ASK%7B%7D", timeout=2):
                return
        except (urllib.error.URLError, ConnectionError):
            time.sleep(0.1)
    raise RuntimeError(f"{name} did not come up on {base} within {limit} s")
