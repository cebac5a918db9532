"""The vector env over the real AgentBench environments registered in this checkout.

Each registered task is played to completion by its expert through the subprocess
back-end; the registered tasks run mixed in one vector env (with a test-only task
beside them while fewer than two are registered); a worker running a real env is
killed mid-episode and the vector env carries on.
"""

from __future__ import annotations

import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from support.processes import running
from support.vector_test_envs import GUESS

from agentgym_eppo.adapters.trl import trl_environment_class
from agentgym_eppo.registration import ENVIRONMENTS
from agentgym_eppo.vector import EXPERT_ACTION, MultiTaskVectorEnv
from agentgym_eppo.wrappers import (
    OpenAIToolsView,
    ReActFormat,
    ToolCallFormatWrapper,
    VectorEpisodeMonitor,
    read_trajectories,
)

# The fast, self-contained tasks first; a few tasks at most keep this file quick.
PREFERRED = ("db", "kg", "os", "webshop", "alfworld")
REGISTERED = [task for task in PREFERRED if task in ENVIRONMENTS]

pytestmark = pytest.mark.skipif(not REGISTERED, reason="no AgentBench environment is registered")


def play_to_the_end(venv: MultiTaskVectorEnv, limit: int = 60) -> dict[int, dict]:
    """Step every running slot with its expert until all have ended; final infos by slot."""
    finals: dict[int, dict] = {}
    for _ in range(limit):
        running = [int(i) for i in np.flatnonzero(venv.running)]
        if not running:
            return finals
        for outcome in venv.step_some(running, [EXPERT_ACTION] * len(running)):
            if outcome.done:
                finals[outcome.index] = {**outcome.info, "reward": outcome.reward}
    raise AssertionError(f"episodes still running after {limit} rounds")


@pytest.mark.slow
def test_real_tasks_run_mixed_and_their_experts_complete_every_slot(tmp_path: Path) -> None:
    tasks = REGISTERED[:4]
    slots = {task: 2 for task in tasks}
    if len(tasks) < 2:
        slots[GUESS] = 2  # a second, test-only task so the slots are mixed
    venv = VectorEpisodeMonitor(
        MultiTaskVectorEnv(slots, group_size=2, split="dev", backend="subprocess", seed=0),
        tmp_path / "episodes.jsonl",
    )
    try:
        _, infos = venv.reset(seed=0)
        task_ids = list(venv.task_ids)
        assert sorted(set(task_ids)) == sorted({*tasks, *(["guess"] if len(tasks) < 2 else [])})
        for start in range(0, venv.num_envs, 2):
            assert infos["group"][start] == infos["group"][start + 1]
            assert infos["sample_id"][start] == infos["sample_id"][start + 1]
        finals = play_to_the_end(venv)
        assert sorted(finals) == list(range(venv.num_envs))
        for index, info in finals.items():
            assert info["status"] == "completed", (task_ids[index], info)
            assert info["task_id"] == task_ids[index]
            if task_ids[index] != "kg":  # KG's score is its F1; its reward, the exact match
                assert info["reward"] == pytest.approx(info["score"])
        summary = venv.statistics.summary()
        assert all(summary[task]["episodes"] == 2 for task in tasks)
    finally:
        venv.close()
    episodes = read_trajectories(tmp_path / "episodes.jsonl")
    assert len(episodes) == len(finals)
    assert all(e["steps"] and e["status"] == "completed" for e in episodes)


@pytest.mark.slow
def test_a_killed_worker_running_a_real_env_is_a_task_error_and_is_replaced() -> None:
    task = REGISTERED[0]
    venv = MultiTaskVectorEnv({task: 1}, split="dev", backend="subprocess")
    try:
        venv.reset(seed=0)
        group = venv.group_keys[0]
        first_pid = venv.pool.pids()[0]  # type: ignore[attr-defined]
        venv.pool.kill_worker(0)
        (lost,) = venv.step_some([0], [EXPERT_ACTION])
        assert lost.info["status"] == "task_error" and lost.reward == pytest.approx(-0.2)
        assert lost.info["error"] == "worker killed by SIGKILL" and lost.info["group"] == group
        assert venv.pool.pids() != [first_pid]  # type: ignore[attr-defined]
        venv.reset_some([0])
        finals = play_to_the_end(venv)
        assert finals[0]["status"] == "completed"
    finally:
        venv.close()


@pytest.mark.parametrize("task", REGISTERED)
def test_trl_tool_methods_carry_the_real_tools_schemas(task: str) -> None:
    from transformers.utils import get_json_schema

    cls = trl_environment_class(task)
    env = gym.make(ENVIRONMENTS[task].env_id)
    try:
        for schema in env.unwrapped.tool_schemas:
            function = schema["function"]
            generated = get_json_schema(getattr(cls, function["name"]))["function"]
            assert generated["name"] == function["name"]
            assert generated["parameters"]["required"] == function["parameters"]["required"]
            assert set(generated["parameters"]["properties"]) == set(
                function["parameters"]["properties"]
            )
    finally:
        env.close()


@pytest.mark.parametrize("task", REGISTERED)
def test_react_text_and_openai_messages_drive_the_real_expert_to_success(task: str) -> None:
    react = ReActFormat()
    env = ToolCallFormatWrapper(gym.make(ENVIRONMENTS[task].env_id, split="dev"), react)
    view = OpenAIToolsView(task, {"split": "dev"})
    try:
        env.reset(options={"index": 0})
        view.reset(index=0)
        for turn in range(30):
            call = env.unwrapped.expert_action()
            call = call if isinstance(call, dict) else env.unwrapped._parse(call).to_dict()
            text = "Thought: the expert knows.\n" + react.render(call)
            _, reward, terminated, truncated, info = env.step(text)
            tool_call = {"id": f"c{turn}", "type": "function", "function": call}
            view.respond({"role": "assistant", "content": None, "tool_calls": [tool_call]})
            assert view.messages[-1]["content"] == env.unwrapped._transcript[-1]
            if terminated or truncated:
                break
        assert info["status"] == "completed" and view.done and view.reward == reward
    finally:
        env.close()
        view.close()


def _descendants(pid: int) -> set[int]:
    """Live processes below ``pid`` (children, grandchildren, ...)."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z":
            parents[int(stat.parent.name)] = int(fields[1])
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def _gone(pids: set[int], seconds: float = 15.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not any(Path(f"/proc/{pid}").exists() and running(pid) for pid in pids):
            return True
        time.sleep(0.1)
    return False


@pytest.mark.slow
@pytest.mark.skipif("os" not in ENVIRONMENTS, reason="the OS environment is not registered")
def test_a_killed_os_worker_takes_its_sandboxes_with_it_and_close_leaves_none() -> None:
    venv = MultiTaskVectorEnv({"os": 1}, split="dev", backend="subprocess")
    try:
        venv.reset(seed=0)
        worker = venv.pool.pids()[0]  # type: ignore[attr-defined]
        sandboxes = _descendants(worker)
        assert sandboxes, "the OS episode should run in sandbox processes below its worker"
        venv.pool.kill_worker(0)
        (lost,) = venv.step_some([0], [EXPERT_ACTION])
        assert lost.info["status"] == "task_error" and lost.info["worker_restarted"]
        assert _gone(sandboxes | {worker})
        venv.reset_some([0])
        worker = venv.pool.pids()[0]  # type: ignore[attr-defined]
        sandboxes = _descendants(worker)
        assert play_to_the_end(venv)[0]["status"] == "completed"
    finally:
        venv.close()
    assert _gone(sandboxes | {worker})
