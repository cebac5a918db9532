"""Adapters for verl, SkyRL-gym and OpenRLHF, driven the way each library drives them.

These libraries are not dependencies (each pins its own torch and inference engine),
so in CI the adapters derive from stand-ins with the libraries' interfaces. Where a
library is importable (e.g. a throwaway venv with ``pip install --no-deps verl
skyrl-gym openrlhf`` over this project's packages) the same tests also check that the
adapters are real subclasses of its base classes and go through its own entry points.
"""

from __future__ import annotations

import asyncio
import importlib.util
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from vector_test_envs import COUNT, GUESS

from agentgym_eppo.adapters import openrlhf as openrlhf_adapter
from agentgym_eppo.adapters import verl as verl_adapter
from agentgym_eppo.adapters.skyrl import AgentGymTextEnv, register_skyrl_env

HAS_SKYRL = importlib.util.find_spec("skyrl_gym") is not None
HAS_VERL = importlib.util.find_spec("verl") is not None
HAS_OPENRLHF = importlib.util.find_spec("openrlhf") is not None


def call(word: str) -> str:
    return f'<tool_call>{{"name": "say", "arguments": {{"word": "{word}"}}}}</tool_call>'


# ---------------------------------------------------------------------------- SkyRL-gym


def test_skyrl_text_env_plays_an_episode_in_skyrls_protocol() -> None:
    env = AgentGymTextEnv(
        env_config={"env_kwargs": {"max_turns": 3}}, extras={"task": GUESS, "task_index": 1}
    )
    prompt, metadata = env.init(
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": ""}]
    )
    assert prompt == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Guess the word of guess-train-1."},
    ]
    assert metadata["task_id"] == "guess" and env.max_turns == 3
    first = env.step(call("alpha"))
    assert (first["observations"], first["reward"], first["done"]) == (
        [{"role": "user", "content": "not alpha"}],
        0.0,
        False,
    )
    last = env.step(call("beta"))
    assert (last["observations"], last["reward"], last["done"]) == ([], 1.0, True)
    assert last["metadata"]["status"] == "completed"
    assert env.get_metrics() == {"success": 1.0, "score": 1.0, "turns": 2}
    env.close()
    with pytest.raises(ValueError, match=r"needs extras\['task'\]"):
        AgentGymTextEnv(extras={})


@pytest.mark.skipif(not HAS_SKYRL, reason="skyrl_gym is not installed (not a dependency)")
def test_skyrl_adapter_is_a_base_text_env_made_by_skyrl_gym() -> None:
    import skyrl_gym
    from skyrl_gym.envs.base_text_env import BaseTextEnv

    register_skyrl_env()
    env = skyrl_gym.make("agentgym_eppo", env_config={}, extras={"task": COUNT, "task_index": 0})
    assert isinstance(env, BaseTextEnv) and isinstance(env, AgentGymTextEnv)
    env.init([{"role": "user", "content": ""}])
    assert env.step(call("one"))["reward"] == 1.0
    env.close()


# ---------------------------------------------------------------------------- verl


def _verl_tool() -> verl_adapter.AgentGymTool:
    (entry,) = [
        e
        for e in verl_adapter.verl_tool_config([GUESS])["tools"]
        if e["tool_schema"]["function"]["name"] == "say"
    ]
    schema: Any = entry["tool_schema"]
    if HAS_VERL:
        from verl.tools.schemas import OpenAIFunctionToolSchema

        schema = OpenAIFunctionToolSchema.model_validate(schema)
    return verl_adapter.AgentGymTool(entry["config"], schema)


async def _verl_call(
    tool: verl_adapter.AgentGymTool, request_id: str, index: int, word: str
) -> tuple[Any, float, dict[str, Any]]:
    """What verl's ToolAgentLoop does for one call: create, execute, release."""
    instance_id, _ = await tool.create(create_kwargs={"task_index": index})
    try:
        return await tool.execute(
            instance_id, {"word": word}, agent_data=SimpleNamespace(request_id=request_id)
        )
    finally:
        await tool.release(instance_id)


def test_verl_tools_share_one_episode_per_rollout() -> None:
    tool = _verl_tool()
    assert tool.name == "say"

    async def rollouts() -> None:
        response, reward, metrics = await _verl_call(tool, "r1", 0, "beta")
        assert (response.text, reward, metrics) == (
            "not beta",
            0.0,
            {"status": "running", "success": False, "done": False},
        )
        other, _, _ = await _verl_call(tool, "r2", 2, "beta")  # a second rollout, another instance
        assert other.text == "not beta"
        response, reward, metrics = await _verl_call(tool, "r1", 0, "alpha")
        assert (response.text, reward, metrics["done"]) == ("right", 1.0, True)
        assert await tool.calc_reward("any", agent_data=SimpleNamespace(request_id="r1")) == 1.0
        response, _, _ = await _verl_call(tool, "r2", 2, "gamma")
        assert response.text == "right"

    open_before = len(verl_adapter.SESSIONS)
    asyncio.run(rollouts())
    assert len(verl_adapter.SESSIONS) == open_before  # ended episodes release their envs
    key_task = GUESS
    asyncio.run(_verl_call(tool, "r3", 1, "nope"))
    assert verl_adapter.end_episode(key_task, "r3") == pytest.approx(-0.2)


def test_verl_tool_config_and_rows_follow_verls_formats(tmp_path: Path) -> None:
    path = tmp_path / "tools.yaml"
    verl_adapter.write_verl_tool_config(str(path), [GUESS, COUNT])
    tools = yaml.safe_load(path.read_text())["tools"]
    assert [t["tool_schema"]["function"]["name"] for t in tools] == ["say", "wait", "die"] * 2
    assert tools[0]["class_name"] == "agentgym_eppo.adapters.verl.AgentGymTool"
    assert tools[3]["config"] == {"type": "native", "task": COUNT, "env_kwargs": {}}
    (row,) = verl_adapter.verl_rows(GUESS, [2])
    assert row["prompt"][1] == {"role": "user", "content": "Guess the word of guess-train-2."}
    assert row["extra_info"]["tools_kwargs"]["say"] == {"create_kwargs": {"task_index": 2}}
    assert row["data_source"] == "agentgym_eppo/guess" and row["agent_name"] == "tool_agent"


@pytest.mark.skipif(not HAS_VERL, reason="verl is not installed (not a dependency)")
def test_verl_adapter_is_a_verl_base_tool() -> None:
    from verl.tools.base_tool import BaseTool
    from verl.tools.schemas import ToolResponse

    tool = _verl_tool()
    assert isinstance(tool, BaseTool)
    response, _, _ = asyncio.run(_verl_call(tool, "real-verl", 1, "beta"))
    assert isinstance(response, ToolResponse) and response.text == "right"


# ---------------------------------------------------------------------------- OpenRLHF


def test_openrlhf_agent_instance_plays_an_episode() -> None:
    pytest.importorskip("torch")
    agent = openrlhf_adapter.AgentGymAgentInstance()

    async def episode() -> list[dict[str, Any]]:
        reset = await agent.reset({"observation": "<prompt>", "label": f"{GUESS}:2"})
        assert reset == {"observation": "<prompt>"}
        return [
            await agent.step({"action_text": call(w), "sampling_params": None})
            for w in ("alpha", "gamma")
        ]

    first, last = asyncio.run(episode())
    assert first["environment_feedback"] == (
        "\n<|im_start|>user\n<tool_response>\nnot alpha\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
    )
    assert (first["rewards"].item(), first["done"]) == (0.0, False)
    assert (last["rewards"].item(), last["scores"].item(), last["done"]) == (1.0, 1.0, True)
    assert last["environment_feedback"] == "" and last["extra_logs"] == {
        "status": "completed",
        "success": 1.0,
    }


def test_openrlhf_labels_name_the_task_instance() -> None:
    assert openrlhf_adapter.parse_label('{"task": "db", "task_index": 3}') == ("db", 3, None)
    assert openrlhf_adapter.parse_label("kg:17") == ("kg", 17, None)
    with pytest.raises(ValueError, match="label must be JSON"):
        openrlhf_adapter.parse_label("db")


def test_openrlhf_loads_the_adapter_file_as_its_agent_func_path() -> None:
    spec = importlib.util.spec_from_file_location("agent_module", openrlhf_adapter.__file__)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # as openrlhf.trainer.ray.vllm_engine does
    executor = module.AgentExecutor()
    assert executor.agent_instance_cls.__name__ == "AgentGymAgentInstance"
    if HAS_OPENRLHF:
        from openrlhf.utils.agent import AgentExecutorBase, AgentInstanceBase

        assert isinstance(executor, AgentExecutorBase)
        assert issubclass(executor.agent_instance_cls, AgentInstanceBase)
