"""Shared pieces of the KG tests: a tiny hand-made graph and a real SPARQL server.

The tiny graph (three films by one director, two actors) is small enough that every
expected observation in the tests can be checked by eye; it is written with the
generator's own serialiser, so it carries the real schema triples.
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
from datetime import date
from pathlib import Path
from typing import Any

from agentgym_eppo.environments.kg.generator import MiniFreebase, graph_triples, write_graph
from agentgym_eppo.environments.kg.schema import ACTOR, DIRECTOR, FILM, PERSON

DIRECTOR_ID, ACTOR_BO, ACTOR_CY = "m.0dir1", "m.0act1", "m.0act2"
FIRST, SECOND, THIRD = "m.0f1", "m.0f2", "m.0f3"


def tiny_graph() -> MiniFreebase:
    graph = MiniFreebase()
    for entity, name, types in (
        (DIRECTOR_ID, "Ada Lane", (PERSON, DIRECTOR)),
        (ACTOR_BO, "Bo Reed", (PERSON, ACTOR)),
        (ACTOR_CY, "Cy Moss", (PERSON, ACTOR)),
        (FIRST, "First Light", (FILM,)),
        (SECOND, "Second Wind", (FILM,)),
        (THIRD, "Third Act", (FILM,)),
    ):
        graph.names[entity] = name
        graph.types[entity].extend(types)
    for film, runtime, released, cast in (
        (FIRST, 100.0, date(2001, 1, 1), (ACTOR_BO, ACTOR_CY)),
        (SECOND, 120.0, date(1999, 5, 5), (ACTOR_BO,)),
        (THIRD, 120.0, date(2010, 3, 3), (ACTOR_CY,)),
    ):
        graph.link(film, "film.film.directed_by", DIRECTOR_ID)
        for actor in cast:
            graph.link(film, "film.film.starring", actor)
        graph.values[(film, "film.film.runtime")] = runtime
        graph.values[(film, "film.film.initial_release_date")] = released
    return graph


def write_tiny_graph(path: Path) -> Path:
    write_graph(path, graph_triples(tiny_graph()))
    return path


def tiny_task(**overrides: Any) -> dict[str, Any]:
    """'which films did Ada Lane direct that star Bo Reed?' in AgentBench's record format."""
    record: dict[str, Any] = {
        "qid": "tiny-0",
        "question": "which films directed by Ada Lane star Bo Reed?",
        "entities": {"Ada Lane": DIRECTOR_ID, "Bo Reed": ACTOR_BO},
        "actions": [
            f"get_relations({DIRECTOR_ID})",
            f"get_neighbors({DIRECTOR_ID},film.director.film)",
            f"get_relations({ACTOR_BO})",
            f"get_neighbors({ACTOR_BO},film.actor.film)",
            "intersection(#0,#1)",
        ],
        "answer": [
            {"answer_type": "Entity", "answer_argument": FIRST, "entity_name": "First Light"},
            {"answer_type": "Entity", "answer_argument": SECOND, "entity_name": "Second Wind"},
        ],
    }
    record.update(overrides)
    return record


def call(name: str, **arguments: str) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def oxigraph_binary() -> str | None:
    """The ``oxigraph`` server CLI from the ``oxigraph`` wheel, beside this Python or on PATH."""
    beside = Path(sys.executable).parent / "oxigraph"
    return str(beside) if beside.is_file() else shutil.which("oxigraph")


@contextlib.contextmanager
def oxigraph_server(graph_file: Path, binary: str) -> Iterator[str]:
    """Serve ``graph_file`` from a real Oxigraph server on loopback; yield its query URL."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    process = subprocess.Popen(
        [binary, "serve", "--bind", f"127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        _wait_until_up(base, process)
        data = graph_file.read_bytes()
        if graph_file.name.endswith(".gz"):
            data = gzip.decompress(data)
        upload = urllib.request.Request(
            f"{base}/store?default",
            data=data,
            headers={"Content-Type": "application/n-triples"},
            method="POST",
        )
        with urllib.request.urlopen(upload, timeout=120) as response:
            assert response.status in (200, 201, 204)
        yield f"{base}/query"
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def _wait_until_up(base: str, process: subprocess.Popen[bytes], limit: float = 30.0) -> None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if process.poll() is not None:
            stderr = process.stderr.read().decode() if process.stderr else ""
            raise RuntimeError(f"oxigraph serve exited with {process.returncode}: {stderr}")
        try:
            with urllib.request.urlopen(f"{base}/query?query=ASK%7B%7D", timeout=2):
                return
        except (urllib.error.URLError, ConnectionError):
            time.sleep(0.1)
    raise RuntimeError(f"oxigraph serve did not come up on {base} within {limit} s")
