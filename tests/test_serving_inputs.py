"""What a client sends that the server must not choke on: WebSocket messages that are not
messages, validation errors a client can read, input quoted back in part only, HTTP
bodies with lone surrogates, and ``POST /mcp``, which opens no session."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

pytest.importorskip("openenv", reason="openenv-core is not installed (the serve extra)")

from openenv.core.generic_client import GenericEnvClient
from support.serving_support import thread_server
from websockets.sync.client import connect

from agentgym_eppo.serving.limits import MAX_ERROR_CHARS, MAX_JSON_DEPTH
from agentgym_eppo.serving.types import MAX_ACTION_CHARS

SELECT_ONE = {"tool_call": {"name": "execute_sql", "arguments": {"query": "SELECT 1"}}}


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with thread_server("db", max_sessions=4) as base:
        yield base


def _ws(url: str) -> str:
    return url.replace("http://", "ws://") + "/ws"


def _ask(ws, text: str | bytes) -> dict:
    ws.send(text)
    return dict(json.loads(ws.recv(timeout=30)))


def _live(url: str) -> int:
    return int(httpx.get(f"{url}/sessions", timeout=10).json()["active_sessions"])


def test_messages_that_are_not_json_objects_are_refused_and_the_session_goes_on(url: str) -> None:
    arguments: dict[str, Any] = {"query": "SELECT 1"}
    for _ in range(MAX_JSON_DEPTH + 10):
        arguments = {"query": "SELECT 1", "more": arguments}
    deep_action = {"tool_call": {"name": "execute_sql", "arguments": arguments}}
    not_messages: dict[str | bytes, str] = {
        "[1, 2]": "got an array",
        "5": "got a number",
        '"step"': "got a string",
        "null": "got null",
        "true": "got a boolean",
        "[" * 100_000 + "]" * 100_000: f"nests deeper than {MAX_JSON_DEPTH} levels",
        json.dumps({"type": "step", "data": deep_action}): "nests deeper",
        b'{"type": "state"}': "send text messages",
    }
    with connect(_ws(url)) as ws:
        assert (
            _ask(ws, json.dumps({"type": "reset", "data": {"index": 0}}))["type"] == "observation"
        )
        for text, says in not_messages.items():
            answer = _ask(ws, text)
            assert answer["type"] == "error", says
            assert answer["data"]["code"] == "VALIDATION_ERROR"
            assert says in answer["data"]["message"]
        # the same session, its episode untouched: the next step is its first turn
        answer = _ask(ws, json.dumps({"type": "step", "data": SELECT_ONE}))
        assert answer["type"] == "observation", answer
        assert answer["data"]["observation"]["info"]["turn"] == 1


def test_validation_errors_say_what_is_wrong_where_openenv_clients_show_it(url: str) -> None:
    with GenericEnvClient(base_url=url).sync() as client:
        client.reset(index=0)
        with pytest.raises(
            RuntimeError, match=r"invalid message: query: Extra inputs are not permitted"
        ):
            client.step({"query": "SELECT 1"})
        # the task's tools are named in the message itself
        with pytest.raises(
            RuntimeError,
            match=r"tool_call\.name: Input should be 'execute_sql' or 'commit_final_answer'"
            r".*VALIDATION_ERROR",
        ):
            client.step({"tool_call": {"name": "drop_everything", "arguments": {}}})
        assert client.step(SELECT_ONE).observation["info"]["turn"] == 1


def test_an_over_long_action_is_quoted_back_in_part(url: str) -> None:
    text = "x" * (MAX_ACTION_CHARS + 1)
    with connect(_ws(url), max_size=None) as ws:
        _ask(ws, json.dumps({"type": "reset", "data": {"index": 0}}))
        ws.send(json.dumps({"type": "step", "data": {"text": text}}))
        raw = ws.recv(timeout=30)
    answer = json.loads(raw)
    assert answer["data"]["code"] == "VALIDATION_ERROR"
    assert "text: String should have at most 1048576 characters" in answer["data"]["message"]
    assert f"({MAX_ACTION_CHARS + 1} characters in all)" in answer["data"]["errors"][0]["input"]
    assert len(raw) < MAX_ERROR_CHARS * 2
    response = httpx.post(f"{url}/step", json={"action": {"text": text}}, timeout=30)
    assert response.status_code == 422
    assert len(response.text) < MAX_ERROR_CHARS * 2
    assert "characters in all" in response.json()["detail"][0]["input"]


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/reset", b'{"x\\ud800": 1}'),
        ("/step", b'{"action": {"text": "ls \\ud800"}}'),
        ("/mcp", b'{"jsonrpc": "2.0", "method": "\\udfff", "id": 1}'),
    ],
)
def test_a_lone_surrogate_in_an_http_body_is_a_client_error(
    url: str, path: str, body: bytes
) -> None:
    response = httpx.post(
        f"{url}{path}", content=body, headers={"content-type": "application/json"}, timeout=30
    )
    assert response.status_code == 400
    assert "lone surrogate" in response.json()["detail"]
    assert httpx.get(f"{url}/health", timeout=10).status_code == 200


def test_post_mcp_opens_no_session(url: str) -> None:
    before = _live(url)
    for _ in range(8):
        response = httpx.post(
            f"{url}/mcp",
            json={"jsonrpc": "2.0", "method": "openenv/session/create", "params": {}, "id": 1},
            timeout=30,
        )
        assert "no MCP tools" in response.json()["error"]["message"]
        assert "session_id" not in (response.json().get("result") or {})
    listed = httpx.post(
        f"{url}/mcp", json={"jsonrpc": "2.0", "method": "tools/list", "id": 2}, timeout=30
    )
    assert "WebSocket session at /ws" in listed.json()["error"]["message"]
    assert _live(url) == before
    with GenericEnvClient(base_url=url).sync() as client:
        assert client.reset().observation["info"]["status"] == "running"
