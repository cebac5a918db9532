"""Every task over OpenEnv, played by its expert through OpenEnv's own ``GenericEnvClient``,
gives what the same actions give in-process: observations, rewards, ends and ``info``."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest

pytest.importorskip("openenv", reason="openenv-core is not installed (the serve extra)")

from openenv.core.generic_client import GenericEnvClient
from support.serving_support import thread_server

import agentgym_eppo  # noqa: F401
from agentgym_eppo.registration import ENVIRONMENTS, env_id_for

INSTANCES = (0, 3)


def _plain(value: object) -> object:
    """``info`` as JSON gives it back (tuples become lists)."""
    return json.loads(json.dumps(value))


@pytest.mark.slow
@pytest.mark.parametrize("task", sorted(ENVIRONMENTS))
def test_expert_over_the_server_matches_in_process(task: str) -> None:
    local = gym.make(env_id_for(task))
    try:
        with thread_server(task) as url, GenericEnvClient(base_url=url).sync() as remote:
            for index in INSTANCES:
                text, info = local.reset(options={"index": index})
                result = remote.reset(index=index)
                assert result.observation["text"] == text
                assert result.observation["info"] == _plain(info)
                assert result.reward is None and not result.done
                done, total = False, 0.0
                while not done:
                    action = local.unwrapped.expert_action()  # type: ignore[attr-defined]
                    text, reward, terminated, truncated, info = local.step(action)
                    result = remote.step({"tool_call": action})
                    observation = result.observation
                    assert observation["text"] == text, task
                    assert result.reward == reward
                    assert (observation["terminated"], observation["truncated"]) == (
                        terminated,
                        truncated,
                    )
                    assert observation["info"] == _plain(info)
                    done, total = result.done, total + result.reward
                assert observation["info"]["status"] == "completed"
                assert observation["info"]["success"] is True, (task, index)
                assert total > 0
                state = remote.state()
                assert state["task_id"] == task and state["status"] == "completed"
    finally:
        local.close()
