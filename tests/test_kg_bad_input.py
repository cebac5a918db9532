"""Bad input to the KG env: each gets a clear observation or a clean end, never a crash or hang.

Malformed or missing variables end the episode (agent_validation_failed, -0.2);
unknown entities and relations and injection attempts are ordinary observations;
a 100k-neighbour fan-out is summarised; an endpoint that is down, slow or broken
ends the episode as task_error within its timeout.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.kg_fixtures import call, tiny_task, write_tiny_graph

from agentgym_eppo.environments.kg import KGEnv
from agentgym_eppo.environments.kg.graph import write_graph
from agentgym_eppo.environments.kg.queries import FREEBASE_NS, iri


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> KGEnv:
    graph = write_tiny_graph(tmp_path_factory.mktemp("kg") / "tiny.nt.gz")
    return KGEnv(tasks=[tiny_task()], graph=graph)


@pytest.mark.parametrize(
    ("reference", "message"),
    [
        ("#-1", "Invalid variable '#-1': variables are written #0, #1, ..."),
        ("#x", "Invalid variable '#x': variables are written #0, #1, ..."),
        ("#999", "Invalid variable #999: it does not exist (variables so far: #0 to #0)"),
    ],
)
def test_malformed_or_missing_variable_ends_as_validation_failed(
    env: KGEnv, reference: str, message: str
) -> None:
    env.reset(options={"index": 0})
    env.step(call("get_neighbors", variable="Ada Lane", relation="film.director.film"))
    obs, reward, terminated, truncated, info = env.step(call("get_relations", variable=reference))
    assert (obs, reward, terminated, truncated) == (message, -0.2, True, False)
    assert info["status"] == "agent_validation_failed"


def test_final_answer_naming_a_missing_variable_ends_as_validation_failed(env: KGEnv) -> None:
    env.reset(options={"index": 0})
    obs, reward, _, _, info = env.step("Final Answer: #0")
    assert obs == "Invalid variable #0: it does not exist (variables so far: none yet)"
    assert (reward, info["status"]) == (-0.2, "agent_validation_failed")


def test_unknown_entity_name_is_an_observation(env: KGEnv) -> None:
    env.reset(options={"index": 0})
    obs, reward, terminated, _, info = env.step(call("get_relations", variable="Nobody Known"))
    assert obs == (
        "Error processing tool call: get_relations: variable must be a variable or an entity, "
        "got 'Nobody Known'"
    )
    assert (reward, terminated, info["status"]) == (0.0, False, "running")


def test_unknown_entity_id_has_no_relations(env: KGEnv) -> None:
    env.reset(options={"index": 0})
    obs, *_ = env.step(call("get_relations", variable="m.0doesnotexist"))
    assert obs == "Observation: []"


def test_unknown_relation_is_an_observation(env: KGEnv) -> None:
    env.reset(options={"index": 0})
    obs, _, terminated, _, _ = env.step(
        call("get_neighbors", variable="Ada Lane", relation="no.such.relation")
    )
    assert obs == (
        "Error processing tool call: get_neighbors: relation must be a relation of the variable, "
        "got 'no.such.relation'"
    )
    assert not terminated


@pytest.mark.parametrize(
    "payload",
    [
        "m.0dir1> ?p ?o } ; DROP ALL ; SELECT * { ?s ?p <x",
        'Ada Lane" } UNION { ?s ?p ?o',
        "m.0dir1'} ; DROP",
        "{ ?s ?p ?o }",
    ],
)
def test_sparql_injection_in_arguments_never_reaches_a_query(env: KGEnv, payload: str) -> None:
    env.reset(options={"index": 0})
    obs, _, terminated, _, _ = env.step(call("get_relations", variable=payload))
    assert obs.startswith("Error processing tool call: get_relations: variable must be a variable")
    obs, _, terminated, _, _ = env.step(
        call(
            "get_neighbors",
            variable="Ada Lane",
            relation=f"film.director.film> ?x . }} ; DROP {payload}",
        )
    )
    assert obs.startswith("Error processing tool call: get_neighbors: relation must be a relation")
    assert not terminated
    # The graph is intact: the tools still answer.
    obs, *_ = env.step(call("get_relations", variable="Ada Lane"))
    assert obs == "Observation: [film.director.film]"


def test_iri_builder_refuses_anything_but_freebase_names() -> None:
    assert iri(FREEBASE_NS, "film.film.genre") == "<http://rdf.freebase.com/ns/film.film.genre>"
    for bad in ("a> ?p ?o", "m.0x}", 'x"y', "", "a b", "m.0x\n"):
        with pytest.raises(ValueError, match="not a valid entity or property name"):
            iri(FREEBASE_NS, bad)


@pytest.fixture(scope="module")
def hub_graph(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One hub entity with 100,000 neighbours through one relation."""
    ns = FREEBASE_NS

    def lines() -> Iterator[str]:
        yield f'<{ns}m.0hub> <{ns}type.object.name> "The Hub"@en .'
        yield f"<{ns}test.hub.members> <{ns}type.property.expected_type> <{ns}test.member> ."
        for k in range(100_000):
            yield f"<{ns}m.0hub> <{ns}test.hub.members> <{ns}m.0n{k:06d}> ."
        for k in range(20):
            yield f'<{ns}m.0n{k:06d}> <{ns}type.object.name> "Member {k}"@en .'

    path = tmp_path_factory.mktemp("hub") / "hub.nt.gz"
    write_graph(path, lines())
    return path


def test_huge_fan_out_is_summarised_not_dumped(hub_graph: Path) -> None:
    task = {
        "qid": "hub",
        "question": "who is in the hub?",
        "entities": {"The Hub": "m.0hub"},
        "answer": [{"answer_argument": "m.0n000000"}],
    }
    env = KGEnv(tasks=[task], graph=hub_graph)
    env.reset(options={"index": 0})
    assert (
        env.step(call("get_relations", variable="The Hub"))[0] == "Observation: [test.hub.members]"
    )
    obs, *_ = env.step(call("get_neighbors", variable="The Hub", relation="test.hub.members"))
    assert obs == "Observation: variable #0, which are instances of test.member"
    env.step(call("count", variable="#0"))
    obs, reward, terminated, _, info = env.step(call("final_answer", variable="#0"))
    assert obs.startswith("Observation: variable #0 holds 100000 entities: m.0n000000 (Member 0), ")
    assert obs.endswith("m.0n000009 (Member 9), and 99990 more")
    assert len(obs) < 800 and not obs.endswith("[TRUNCATED]")
    assert (reward, terminated, info["score"]) == (0.0, True, pytest.approx(2 / 100_001))
    env.reset(options={"index": 0})
    env.step(call("get_neighbors", variable="The Hub", relation="test.hub.members"))
    env.step(call("count", variable="#0"))
    assert (
        env.step(call("final_answer", variable="#1"))[0]
        == "Observation: variable #1 is the number 100000"
    )


def test_endpoint_that_is_down_ends_as_task_error() -> None:
    # A port held bound but not listening refuses connections, and nothing else can take
    # it meanwhile (a port found free and released could be reused by another process).
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{closed.getsockname()[1]}/query"
        env = KGEnv(tasks=[tiny_task()], sparql_endpoint=url, endpoint_timeout=5)
        env.reset(options={"index": 0})
        obs, reward, terminated, _, info = env.step(call("get_relations", variable="Ada Lane"))
    assert obs.startswith(f"cannot reach SPARQL endpoint {url}: ")
    assert "refused" in obs.lower()
    assert (reward, terminated, info["status"]) == (-0.2, True, "task_error")


@pytest.fixture
def silent_server() -> Iterator[str]:
    """A TCP server that accepts connections and reads requests but never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(0.2)
    stop = threading.Event()
    held: list[socket.socket] = []

    def serve() -> None:
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except TimeoutError:
                continue
            held.append(connection)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/sparql"
    finally:
        stop.set()
        thread.join(timeout=5)
        for connection in held:
            connection.close()
        listener.close()


def test_endpoint_that_never_answers_times_out_as_task_error(silent_server: str) -> None:
    env = KGEnv(tasks=[tiny_task()], sparql_endpoint=silent_server, endpoint_timeout=0.5)
    env.reset(options={"index": 0})
    obs, reward, terminated, _, info = env.step(call("get_relations", variable="Ada Lane"))
    # the server never answers: only the client's 0.5 s timeout can end the step
    assert obs == f"SPARQL endpoint {silent_server} did not answer within 0.5 s"
    assert (reward, terminated, info["status"]) == (-0.2, True, "task_error")


def test_endpoint_url_and_backend_choice_are_checked_up_front(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="sparql_endpoint must be an http"):
        KGEnv(tasks=[tiny_task()], sparql_endpoint="ftp://example.org/sparql")
    with pytest.raises(ValueError, match="store must be one of"):
        KGEnv(tasks=[tiny_task()], store="virtuoso")  # type: ignore[arg-type]
    with pytest.raises(FileNotFoundError, match="graph file not found"):
        KGEnv(tasks=[tiny_task()], graph=tmp_path / "missing.nt")


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    tool=st.sampled_from([spec.name for spec in KGEnv.tools]),
    first=st.one_of(st.text(max_size=40), st.sampled_from(["#0", "#1", "Ada Lane", "m.0f1"])),
    second=st.one_of(st.text(max_size=40), st.sampled_from(["#0", "film.film.runtime"])),
)
def test_any_argument_text_gives_an_observation_or_a_validation_failure(
    env: KGEnv, tool: str, first: str, second: str
) -> None:
    env.reset(options={"index": 0})
    env.step(call("get_neighbors", variable="Ada Lane", relation="film.director.film"))
    names = next(spec.argument_names for spec in env.tools if spec.name == tool)
    arguments = dict(zip(names, [first, second], strict=False))
    obs, _, _, _, info = env.step({"name": tool, "arguments": arguments})
    assert info["status"] in ("running", "completed", "agent_validation_failed"), obs
    assert info["status"] != "agent_validation_failed" or obs.startswith("Invalid variable")
