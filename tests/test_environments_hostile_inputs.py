"""Hostile actions: what a policy under RL pressure sends must end as an
agent status or an ordinary observation, never raise out of ``step`` and never stall.

* a JSON integer past Python's int-string limit, in every action form, in all five
  environments (real backends: the OS env on its default bubblewrap sandbox);
* KG: ``intersection(#k, #k)`` repeated keeps every query small, a variable may hold
  only so many entities, a query past its deadline is a message, and ``#`` followed by
  thousands of digits is ``agent_validation_failed``.
"""

from __future__ import annotations

import gzip
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support.chat_servers import ChatHandler, ChatServer, Reply

from agentgym_eppo.core import Status
from agentgym_eppo.environments.kg.env import KGEnv
from agentgym_eppo.environments.kg.queries import FREEBASE_NS
from agentgym_eppo.environments.kg.store import GraphStore, Row, embedded_store
from benchmarks.fuzz_tools import ENV_CLASSES, env_class

AGENT_STATUSES = {Status.AGENT_INVALID_ACTION.value, Status.AGENT_VALIDATION_FAILED.value}
HUGE_INTEGER = "7" * 5_000  # Python refuses int() of more than 4,300 digits by default
ENV_KWARGS: dict[str, dict[str, Any]] = {"os": {"command_timeout": 5.0}}


def _forms(tool: str, key: str) -> dict[str, Any]:
    arguments = f'{{"{key}": {HUGE_INTEGER}}}'
    call = f'{{"name": "{tool}", "arguments": {arguments}}}'
    return {
        "tagged_text": f"<tool_call>{call}</tool_call>",
        "bare_json": f"Let me call the tool.\n{call}",
        "arguments_string": {"name": tool, "arguments": arguments},
        "openai_entry": {"type": "function", "function": {"name": tool, "arguments": arguments}},
        "assistant_message": {
            "role": "assistant",
            "tool_calls": [
                {"type": "function", "function": {"name": tool, "arguments": arguments}}
            ],
        },
        "python_int_argument": {"name": tool, "arguments": {key: int(HUGE_INTEGER[:4000]) ** 2}},
    }


@pytest.fixture(scope="module", params=list(ENV_CLASSES))
def env(request: pytest.FixtureRequest) -> Iterator[Any]:
    instance = env_class(request.param)(split="dev", **ENV_KWARGS.get(request.param, {}))
    yield instance
    instance.close()


@pytest.mark.parametrize(
    "form",
    [
        "tagged_text",
        "bare_json",
        "arguments_string",
        "openai_entry",
        "assistant_message",
        "python_int_argument",
    ],
)
def test_an_integer_past_the_int_string_limit_is_an_invalid_action(env: Any, form: str) -> None:
    tool = env.tools[0]
    action = _forms(tool.name, tool.argument_names[0])[form]
    for mode in ("abort", "feedback"):
        env.invalid_action = mode
        env.reset(seed=0)
        observation, reward, terminated, _, info = env.step(action)
        assert observation.startswith("Invalid tool call: ")
        if mode == "abort":
            assert info["status"] in AGENT_STATUSES and terminated
            assert reward == env.abort_penalty
        else:
            assert info["status"] == Status.RUNNING.value and not terminated
    env.invalid_action = "abort"


# ---------------------------------------------------------------------------- KG


def call(name: str, **arguments: str) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


@pytest.fixture(scope="module")
def ring_graph(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A hub with 300 members, each a friend of the next (a ring)."""
    ns, size = FREEBASE_NS, 300
    lines = [f"<{ns}m.0hub> <{ns}test.hub.members> <{ns}m.0n{k:04d}> ." for k in range(size)]
    lines += [
        f"<{ns}m.0n{k:04d}> <{ns}test.member.friend> <{ns}m.0n{(k + 1) % size:04d}> ."
        for k in range(size)
    ]
    lines += [
        f"<{ns}m.0n{k:04d}> <{ns}test.member.age> "
        f'"{k}"^^<http://www.w3.org/2001/XMLSchema#integer> .'
        for k in range(size)
    ]
    for relation, target in [
        ("test.hub.members", "test.member"),
        ("test.member.friend", "test.member"),
        ("test.member.age", "type.int"),
    ]:
        lines.append(f"<{ns}{relation}> <{ns}type.property.expected_type> <{ns}{target}> .")
    path = tmp_path_factory.mktemp("ring") / "ring.nt.gz"
    path.write_bytes(gzip.compress("\n".join(lines).encode()))
    return path


RING_TASK = {
    "qid": "ring",
    "question": "who is in the hub?",
    "entities": {"The Hub": "m.0hub"},
    "answer": [{"answer_argument": "m.0n0000"}],
}


class QueryLog(GraphStore):
    """The real embedded store, remembering the length of every query it is sent."""

    def __init__(self, store: GraphStore) -> None:
        self.store = store
        self.lengths: list[int] = []

    def select(self, query: str, timeout: float | None = None) -> list[Row]:
        self.lengths.append(len(query))
        assert len(query) < 100_000, f"a {len(query):,}-character query"
        return self.store.select(query, timeout=timeout)

    @property
    def description(self) -> str:
        return self.store.description


def _ring_env(ring_graph: Path, **kwargs: Any) -> tuple[KGEnv, QueryLog]:
    env = KGEnv(tasks=[RING_TASK], graph=ring_graph, max_turns=40, **kwargs)
    log = QueryLog(embedded_store(ring_graph))
    env.store = log
    env.reset(options={"index": 0})
    return env, log


def test_repeated_self_intersection_keeps_every_query_small(ring_graph: Path) -> None:
    env, log = _ring_env(ring_graph)
    assert env.step(call("get_neighbors", variable="The Hub", relation="test.hub.members"))[
        0
    ].startswith("Observation: variable #0")
    for k in range(20):  # AgentBench's lazy programs double the query with each of these
        observation, *_ = env.step(call("intersection", variable1=f"#{k}", variable2=f"#{k}"))
        assert observation.startswith(f"Observation: variable #{k + 1}")
    for action in (
        call("get_relations", variable="#20"),
        call("get_neighbors", variable="#20", relation="test.member.friend"),
        call("get_attributes", variable="#21"),
        call("argmax", variable="#21", attribute="test.member.age"),
        call("count", variable="#20"),
    ):
        observation, _, _, _, info = env.step(action)
        assert info["status"] == "running", observation
        assert not observation.startswith("Error"), observation
    # Each query is one join over the variable's 300 members, whatever came before.
    assert max(log.lengths) < 300 * 60
    assert str(env.session.variables[20]).endswith("...")  # the logical form, cut
    observation, *_, info = env.step(call("final_answer", variable="#23"))
    assert (observation, info["status"]) == (
        "Observation: variable #23 is the number 300",
        "completed",
    )


def test_a_result_larger_than_a_variable_may_hold_is_refused_with_a_message(
    ring_graph: Path,
) -> None:
    env, _ = _ring_env(ring_graph, max_variable_size=100)
    observation, _, terminated, _, info = env.step(
        call("get_neighbors", variable="The Hub", relation="test.hub.members")
    )
    assert observation == (
        "Error processing tool call: get_neighbors: the result has more than 100 entities, "
        "more than a variable may hold; follow a more specific relation"
    )
    assert (terminated, info["status"], info["variables"]) == (False, "running", 0)


def test_a_query_past_its_deadline_is_a_message_not_a_task_error(ring_graph: Path) -> None:
    env, _ = _ring_env(ring_graph, query_timeout=1e-9)  # no query can finish in time
    observation, _, terminated, _, info = env.step(
        call("get_neighbors", variable="The Hub", relation="test.hub.members")
    )
    assert observation.startswith("Error processing tool call: get_neighbors: the query ran past")
    assert (terminated, info["status"]) == (False, "running")


@pytest.mark.parametrize("form", ["tool", "text"])
def test_a_variable_with_thousands_of_digits_is_agent_validation_failed(
    ring_graph: Path, form: str
) -> None:
    env, _ = _ring_env(ring_graph)
    reference = "#" + "9" * 5_000
    action = (
        call("final_answer", variable=reference) if form == "tool" else f"Final Answer: {reference}"
    )
    observation, *_, info = env.step(action)
    assert info["status"] == Status.AGENT_VALIDATION_FAILED.value, observation
    assert observation.startswith("Invalid variable '#999")
    assert len(observation) < 200


def test_an_endpoint_answer_is_read_only_up_to_its_bound(
    monkeypatch: pytest.MonkeyPatch, serve_chat: Callable[[Reply], ChatServer]
) -> None:
    """A server that streams an endless answer costs the step a bounded read."""
    from agentgym_eppo.environments.kg import store

    def endless(handler: ChatHandler, body: dict[str, Any], number: int) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "application/sparql-results+json")
        handler.end_headers()
        handler.wfile.write(b'{"head": {"vars": ["r"]}, "results": {"bindings": [')
        for _ in range(10_000):
            handler.wfile.write(b'{"r": {"type": "uri", "value": "x"}}, ' * 100)

    monkeypatch.setattr(store, "MAX_RESPONSE_BYTES", 1 << 20)
    url = serve_chat(endless).url
    env = KGEnv(tasks=[RING_TASK], sparql_endpoint=url, endpoint_timeout=20)
    env.reset(options={"index": 0})
    observation, _, terminated, _, info = env.step(call("get_relations", variable="The Hub"))
    assert observation == f"SPARQL endpoint {url} sent more than 1 MiB for one query"
    assert (terminated, info["status"]) == (True, "task_error")  # the server's fault
