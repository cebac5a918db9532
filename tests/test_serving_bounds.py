"""What one server holds at most, whichever route a client takes: stateless resets take
session slots and run in a worker thread of their own, a session lives on resets and
steps only and its connection goes with it, and a finished OS episode keeps no sandbox."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

pytest.importorskip("openenv", reason="openenv-core is not installed (the serve extra)")

from openenv.core.generic_client import GenericEnvClient
from support.processes import sandboxes
from support.serving_support import thread_server, wait_until
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from agentgym_eppo.serving.environment import AgentBenchEnvironment


def _live(url: str) -> int:
    return int(httpx.get(f"{url}/sessions", timeout=10).json()["active_sessions"])


def _ws(url: str) -> str:
    return url.replace("http://", "ws://") + "/ws"


class _EnvLog:
    """Where each served Gymnasium env was built and closed, and how many lived at once."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.alive = self.most_alive = 0
        self.threads: list[tuple[str, str]] = []
        self._built: dict[int, str] = {}

    def built(self, env: AgentBenchEnvironment) -> None:
        with self.lock:
            self.alive += 1
            self.most_alive = max(self.most_alive, self.alive)
            self._built[id(env)] = threading.current_thread().name

    def closed(self, env: AgentBenchEnvironment) -> None:
        with self.lock:
            self.alive -= 1
            self.threads.append((self._built.pop(id(env)), threading.current_thread().name))


@pytest.fixture
def env_log(monkeypatch: pytest.MonkeyPatch) -> _EnvLog:
    log = _EnvLog()
    make, close = AgentBenchEnvironment._gym_env, AgentBenchEnvironment.close

    def logged_make(self: AgentBenchEnvironment) -> Any:
        fresh = self._env is None
        env = make(self)
        if fresh:
            log.built(self)
        return env

    def logged_close(self: AgentBenchEnvironment) -> None:
        had_env = self._env is not None
        close(self)
        if had_env:
            log.closed(self)

    monkeypatch.setattr(AgentBenchEnvironment, "_gym_env", logged_make)
    monkeypatch.setattr(AgentBenchEnvironment, "close", logged_close)
    return log


def test_stateless_resets_take_session_slots_and_one_worker_thread_each(
    env_log: _EnvLog, caplog: pytest.LogCaptureFixture
) -> None:
    with thread_server("db", max_sessions=1) as url:

        async def resets(count: int) -> list[httpx.Response]:
            async with httpx.AsyncClient(timeout=60) as client:
                calls = (client.post(f"{url}/reset", json={"index": i}) for i in range(count))
                return await asyncio.gather(*calls)

        responses = asyncio.run(resets(8))
        statuses = sorted(response.status_code for response in responses)
        assert set(statuses) <= {200, 503} and statuses[0] == 200
        refused = [response for response in responses if response.status_code == 503]
        for response in refused:
            assert "retry later" in response.json()["detail"]
            assert response.headers["retry-after"] == "1"
        assert env_log.most_alive == 1  # never more environments than slots
        # built and closed in the same thread: a DB env's SQLite connection needs it
        assert env_log.threads and all(built == closed for built, closed in env_log.threads)
        assert not [record for record in caplog.records if record.levelno >= logging.ERROR]
        assert wait_until(lambda: _live(url) == 0, timeout=10)

        # a WebSocket session holds the only slot: a stateless reset waits its turn
        with GenericEnvClient(base_url=url).sync() as client:
            client.reset(index=0)
            response = httpx.post(f"{url}/reset", json={"index": 0}, timeout=30)
            assert response.status_code == 503
            assert "1/1 sessions active" in response.json()["detail"]
        assert wait_until(lambda: _live(url) == 0, timeout=10)
        assert httpx.post(f"{url}/reset", json={"index": 0}, timeout=30).status_code == 200


@pytest.fixture(scope="module")
def idle_url() -> Iterator[str]:
    # OpenEnv's reaper looks every max(timeout / 4, 5) seconds
    with thread_server("db", max_sessions=4, idle_timeout_s=1.0) as url:
        yield url


@pytest.mark.slow
def test_an_idle_session_closes_its_connection_with_the_reason(idle_url: str) -> None:
    with connect(_ws(idle_url)) as ws:
        ws.send(json.dumps({"type": "reset", "data": {"index": 0}}))
        assert json.loads(ws.recv(timeout=30))["type"] == "observation"
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=20)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1000
    assert "idle (no reset or step) for more than 1 s" in closed.value.rcvd.reason
    assert wait_until(lambda: _live(idle_url) == 0, timeout=10)


@pytest.mark.slow
def test_state_and_mcp_messages_do_not_keep_a_session_alive(idle_url: str) -> None:
    tools_list = {"type": "mcp", "data": {"jsonrpc": "2.0", "method": "tools/list", "id": 1}}
    with connect(_ws(idle_url)) as ws:
        ws.send(json.dumps({"type": "reset", "data": {"index": 0}}))
        ws.recv(timeout=30)
        with pytest.raises(ConnectionClosed):
            for _ in range(60):  # 30 s: the session must go after about 1 + 5 s
                ws.send(json.dumps(tools_list))
                ws.recv(timeout=30)
                ws.send(json.dumps({"type": "state"}))
                ws.recv(timeout=30)
                threading.Event().wait(0.5)
    assert wait_until(lambda: _live(idle_url) == 0, timeout=10)


@pytest.mark.slow
def test_a_finished_os_episode_holds_no_sandbox() -> None:
    answer = {"tool_call": {"name": "answer_action", "arguments": {"answer": "surely wrong"}}}
    with thread_server("os") as url, GenericEnvClient(base_url=url).sync() as client:
        client.reset(index=0)
        assert sandboxes()
        result = client.step(answer)
        assert result.done
        assert wait_until(lambda: not sandboxes(), timeout=30)
        # and none starts for a next episode (a sandbox kept in reserve starts at once)
        assert not wait_until(lambda: bool(sandboxes()), timeout=3)
        # the next episode starts its sandbox at its reset
        client.reset(index=1)
        assert sandboxes()
        result = client.step(
            {"tool_call": {"name": "bash_action", "arguments": {"script": "echo again"}}}
        )
        assert result.observation["text"].rstrip().endswith("again")
