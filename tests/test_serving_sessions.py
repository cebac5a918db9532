"""Sessions on one server, through OpenEnv's own clients: 32 at once, the limit, the idle
timeout, and every kind of bad input answered in OpenEnv's error shape while the server
(and the session, where it survives) keeps serving."""

from __future__ import annotations

import asyncio

import gymnasium as gym
import httpx
import pytest

pytest.importorskip("openenv", reason="openenv-core is not installed (the serve extra)")

from openenv.core.generic_client import GenericEnvClient
from support.serving_support import thread_server, wait_until

import agentgym_eppo  # noqa: F401
from agentgym_eppo.serving.client import AgentBenchClient
from agentgym_eppo.serving.types import MAX_ACTION_CHARS

SELECT_ONE = {"tool_call": {"name": "execute_sql", "arguments": {"query": "SELECT 1"}}}


def _expert_episodes(count: int) -> list[tuple[list[dict], float]]:
    """The DB expert's calls and return on instances 0..count-1, played in-process."""
    env = gym.make("AgentBench-DB-v0")
    episodes = []
    try:
        for index in range(count):
            env.reset(options={"index": index})
            calls, total, done = [], 0.0, False
            while not done:
                call = env.unwrapped.expert_action()  # type: ignore[attr-defined]
                _, reward, terminated, truncated, _ = env.step(call)
                calls.append(call)
                total += reward
                done = terminated or truncated
            episodes.append((calls, total))
    finally:
        env.close()
    return episodes


def _live(url: str) -> int:
    return int(httpx.get(f"{url}/sessions", timeout=10).json()["active_sessions"])


@pytest.mark.slow
def test_32_concurrent_sessions_each_play_their_own_episode() -> None:
    episodes = _expert_episodes(32)
    with thread_server("db", max_sessions=32) as url:
        peak: list[int] = []

        async def play(index: int, started: asyncio.Barrier, ended: asyncio.Barrier) -> float:
            calls, _ = episodes[index]
            async with GenericEnvClient(base_url=url) as client:
                result = await client.reset(index=index)
                assert result.observation["info"]["sample_id"]
                await started.wait()  # every session is open before any plays
                total = 0.0
                for call in calls:
                    result = await client.step({"tool_call": call})
                    total += result.reward
                assert result.done
                if index == 0:  # no session closes before this count
                    peak.append(await asyncio.to_thread(_live, url))
                await ended.wait()
                return total

        async def main() -> list[float]:
            started, ended = asyncio.Barrier(32), asyncio.Barrier(32)
            return await asyncio.gather(*(play(i, started, ended) for i in range(32)))

        returns = asyncio.run(main())
        assert returns == [total for _, total in episodes]
        assert peak == [32]
        assert wait_until(lambda: _live(url) == 0, timeout=10)


def test_a_session_over_the_limit_is_refused_and_the_next_one_served() -> None:
    with thread_server("db", max_sessions=2) as url:
        first = GenericEnvClient(base_url=url).sync()
        second = GenericEnvClient(base_url=url).sync()
        with first, second:
            first.reset()
            second.reset()
            with (
                GenericEnvClient(base_url=url).sync() as third,
                pytest.raises(RuntimeError, match=r"at capacity: 2/2 .*CAPACITY_REACHED"),
            ):
                third.reset()
        assert wait_until(lambda: _live(url) == 0, timeout=10)
        with GenericEnvClient(base_url=url).sync() as again:
            assert again.reset().observation["info"]["status"] == "running"


def test_bad_input_gets_openenv_errors_and_the_session_keeps_serving() -> None:
    with thread_server("db", max_sessions=4) as url:
        with AgentBenchClient(base_url=url).sync() as client:
            with pytest.raises(RuntimeError, match=r"send reset before step.*EXECUTION_ERROR"):
                client.step(SELECT_ONE)
            client.reset(index=0)
            bad = {
                "malformed": ({"query": "SELECT 1"}, r"query: Extra inputs.*VALIDATION_ERROR"),
                "both": ({"text": "x", **SELECT_ONE}, "VALIDATION_ERROR"),
                "unknown tool": (
                    {"tool_call": {"name": "drop_everything", "arguments": {}}},
                    "VALIDATION_ERROR",
                ),
                "oversized": ({"text": "x" * (MAX_ACTION_CHARS + 1)}, "VALIDATION_ERROR"),
                # JSON can carry one, UTF-8 cannot: the answer echoing it would end the session
                "lone surrogate": ({"text": "ls \ud800"}, r"lone surrogate.*VALIDATION_ERROR"),
                "surrogate in a call": (
                    {"tool_call": {"name": "execute_sql", "arguments": {"query": "\udfff"}}},
                    r"lone surrogate.*VALIDATION_ERROR",
                ),
            }
            for action, pattern in bad.values():
                with pytest.raises(RuntimeError, match=pattern):
                    client.step(action)
            with pytest.raises(RuntimeError, match=r"unknown reset parameter.*'idx'"):
                client.reset(idx=3)
            # the refused calls cost no turn
            result = client.step(SELECT_ONE)
            assert result.observation.info["turn"] == 1
            # a refused reset ends the running episode, as in-process
            with pytest.raises(RuntimeError, match=r"reset refused: .*out of range"):
                client.reset(index=10**9)
            with pytest.raises(RuntimeError, match=r"episode has ended \(task_error\)"):
                client.step(SELECT_ONE)
            client.reset(index=0)
            result = client.step(SELECT_ONE)
            assert result.observation.info["turn"] == 1
            assert result.observation.info["status"] == "running"
            # a reply the model wrote with an unknown tool is the agent's, as in-process
            result = client.step('{"name": "drop_everything", "arguments": {}}')
            assert result.done and result.observation.info["status"] == "agent_invalid_action"
            with pytest.raises(RuntimeError, match=r"episode has ended .*send reset"):
                client.step(SELECT_ONE)

        # the stateless HTTP endpoints answer FastAPI's {"detail": ...} with a 4xx
        response = httpx.post(f"{url}/step", json={"action": SELECT_ONE}, timeout=10)
        assert response.status_code == 409 and "WebSocket session" in response.json()["detail"]
        response = httpx.post(f"{url}/reset", json={"options": {"index": -5}}, timeout=10)
        assert response.status_code == 400 and "reset refused" in response.json()["detail"]
        big = b'{"action": {"text": "' + b"x" * (9 << 20) + b'"}}'
        response = httpx.post(
            f"{url}/step", content=big, headers={"content-type": "application/json"}
        )
        assert response.status_code == 413 and "limit of 8388608 bytes" in response.text
        assert httpx.get(f"{url}/health", timeout=10).json()["status"] == "healthy"
        assert wait_until(lambda: _live(url) == 0, timeout=10)


def test_a_message_over_the_body_limit_closes_only_its_connection() -> None:
    with thread_server("db", max_body_bytes=64 << 10) as url:
        with GenericEnvClient(base_url=url).sync() as client:
            client.reset()
            with pytest.raises(Exception, match=r"1009|message too big"):
                client.step({"text": "x" * (100 << 10)})
        assert wait_until(lambda: _live(url) == 0, timeout=10)
        with GenericEnvClient(base_url=url).sync() as client:
            assert client.reset().observation["info"]["status"] == "running"


@pytest.mark.slow
def test_an_idle_session_is_closed_and_says_so() -> None:
    # OpenEnv's reaper looks every max(timeout / 4, 5) seconds
    with (
        thread_server("db", idle_timeout_s=1.0) as url,
        GenericEnvClient(base_url=url).sync() as client,
    ):
        client.reset()
        assert _live(url) == 1
        assert wait_until(lambda: _live(url) == 0, timeout=15)
        # the connection went with the session, the reason in its close frame
        with pytest.raises(Exception, match=r"idle \(no reset or step\) .*open a new session"):
            client.step(SELECT_ONE)
