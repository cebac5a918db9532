"""The KG env through a real SPARQL server on loopback gives what the embedded store gives.

The fixture starts a real server, loads the shipped graph and stops the server
afterwards: Oxigraph's own (``oxigraph serve``, from the ``oxigraph`` wheel of the dev
extra) and OpenLink Virtuoso, AgentBench's Freebase server (Debian's
``virtuoso-opensource-7-bin``; skipped when absent). The same query builder serves
every backend, so every dev question must give identical observations, rewards and
infos.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from support.kg_fixtures import call

from agentgym_eppo.environments.kg import KGEnv
from agentgym_eppo.environments.kg.server import (
    oxigraph_binary,
    serve_graph,
    serve_graph_with_virtuoso,
    virtuoso_binaries,
)
from agentgym_eppo.environments.kg.tasks import shipped_graph_path


@pytest.fixture(
    scope="module",
    params=["oxigraph", pytest.param("virtuoso", marks=pytest.mark.slow)],
)
def endpoint(request: pytest.FixtureRequest) -> Iterator[str]:
    if request.param == "oxigraph":
        binary = oxigraph_binary()
        if binary is None:
            pytest.skip("the Oxigraph server is not installed: pip install oxigraph (dev extra)")
        with serve_graph(shipped_graph_path(), binary=binary) as url:
            yield url
    else:
        if virtuoso_binaries() is None:
            pytest.skip("Virtuoso is not installed: apt-get install virtuoso-opensource-7-bin")
        with serve_graph_with_virtuoso(shipped_graph_path()) as url:
            yield url


def episode(env: KGEnv, index: int, detour: bool = False) -> list[Any]:
    """The expert's episode on dev question ``index``; with ``detour``, some agent mistakes first."""
    obs, info = env.reset(options={"index": index})
    transcript: list[Any] = [obs, info["sample_id"]]
    if detour:
        first = env.record.actions[0].split("(")[1].rstrip(")")
        for action in (
            call("get_relations", variable=first),
            call("get_neighbors", variable=first, relation="no.such.relation"),
            call("get_attributes", variable=first),
        ):
            transcript.append(env.step(action))
    while True:
        step = env.step(env.expert_action())
        transcript.append(step)
        if step[2] or step[3]:
            return transcript


def test_every_dev_question_gives_the_same_observations_and_reward_via_the_endpoint(
    endpoint: str,
) -> None:
    embedded = KGEnv(split="dev")
    remote = KGEnv(split="dev", sparql_endpoint=endpoint, endpoint_timeout=30)
    assert remote.store.description == f"SPARQL endpoint {endpoint}"
    for index in range(embedded.num_tasks):
        expected = episode(embedded, index, detour=index % 10 == 0)
        assert episode(remote, index, detour=index % 10 == 0) == expected, index
        assert expected[-1][1] == 1.0


def test_every_dev_question_gives_the_same_transcript_on_rdflib() -> None:
    """rdflib runs the same query text (every 20th dev question: rdflib takes ~75 ms a query)."""
    embedded, pure_python = KGEnv(split="dev"), KGEnv(split="dev", store="rdflib")
    for index in range(0, embedded.num_tasks, 20):
        assert episode(pure_python, index) == episode(embedded, index), index


def test_endpoint_http_error_is_a_task_error(endpoint: str) -> None:
    broken = endpoint.rsplit("/", 1)[0] + "/no-such-service"
    env = KGEnv(split="dev", sparql_endpoint=broken, endpoint_timeout=5)
    env.reset(options={"index": 0})
    obs, reward, terminated, _, info = env.step(env.expert_action())
    assert obs.startswith(f"SPARQL endpoint {broken} answered HTTP 404: ")
    assert (reward, terminated, info["status"]) == (-0.2, True, "task_error")
