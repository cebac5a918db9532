"""MultiTaskVectorEnv: the Gymnasium API, the LLM-rollout API, sampling, workers, faults.

Runs on two test-only tasks (``tests/support/vector_test_envs.py``); the tests with the real
AgentBench environments are in ``test_vector_real_envs.py``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from gymnasium.vector import AutoresetMode, VectorEnv
from support.processes import running
from support.vector_test_envs import COUNT, GUESS, say

from agentgym_eppo.core import Status
from agentgym_eppo.vector import (
    InstanceStream,
    MultiTaskVectorEnv,
    StepOutcome,
    SubEnvSpec,
    WorkerError,
    interleaved_schedule,
)


def wait(seconds: float) -> dict[str, object]:
    return {"name": "wait", "arguments": {"seconds": str(seconds)}}


DIE = {"name": "die", "arguments": {"how": "3"}}


@pytest.fixture
def serial_venv() -> Iterator[MultiTaskVectorEnv]:
    venv = MultiTaskVectorEnv({GUESS: 4, COUNT: 4}, group_size=2, backend="serial")
    yield venv
    venv.close()


def test_slots_interleave_groups_of_tasks_and_name_their_task(
    serial_venv: MultiTaskVectorEnv,
) -> None:
    assert isinstance(serial_venv, VectorEnv)
    assert serial_venv.num_envs == 8
    assert serial_venv.task_ids == ("guess",) * 2 + ("count",) * 2 + ("guess",) * 2 + ("count",) * 2
    assert serial_venv.groups == (0, 0, 1, 1, 2, 2, 3, 3)
    assert serial_venv.metadata["autoreset_mode"] is AutoresetMode.DISABLED
    assert serial_venv.pool.temp_root is None  # in-process envs keep the caller's TMPDIR


def test_group_members_share_one_instance_and_one_group_key(
    serial_venv: MultiTaskVectorEnv,
) -> None:
    observations, infos = serial_venv.reset(seed=0)
    keys = list(infos["group"])
    for start in range(0, 8, 2):
        assert keys[start] == keys[start + 1]
        assert observations[start] == observations[start + 1]
        assert infos["sample_id"][start] == infos["sample_id"][start + 1]
    assert len(set(keys)) == 4
    for key, task, sample_id in zip(keys, infos["task_id"], infos["sample_id"], strict=True):
        name, index, _draw = key.split(":")
        assert name == task and sample_id == f"{task}-train-{index}"


def test_a_group_stays_together_when_its_members_reset_at_different_times(
    serial_venv: MultiTaskVectorEnv,
) -> None:
    serial_venv.reset(seed=0)
    first = serial_venv.reset_some([0])[0][2]["group"]
    assert serial_venv.group_keys[1] != first  # slot 1 still plays the previous draw
    second = serial_venv.reset_some([1])[0][2]["group"]
    assert first == second and serial_venv.group_keys[0] == serial_venv.group_keys[1]


def test_instance_stream_plays_every_instance_once_per_shuffled_pass() -> None:
    stream = InstanceStream("db", 5, seed=3)
    passes = [[stream.next() for _ in range(5)] for _ in range(3)]
    assert all(sorted(p) == [0, 1, 2, 3, 4] for p in passes)
    assert len({tuple(p) for p in passes}) > 1
    assert stream.drawn == 15
    with pytest.raises(ValueError, match="has no instances"):
        InstanceStream("db", 0)


def test_interleaved_schedule_is_round_robin_and_repeats_the_smaller_dataset() -> None:
    schedule = interleaved_schedule({"os": 2, "kg": 6}, seed=0)
    assert [task for task, _ in schedule] == ["os", "kg"] * 6
    os_draws = [index for task, index in schedule if task == "os"]
    kg_draws = [index for task, index in schedule if task == "kg"]
    assert sorted(kg_draws) == list(range(6))
    assert sorted(os_draws) == [0, 0, 0, 1, 1, 1]
    assert interleaved_schedule({"os": 2, "kg": 6}, seed=0) == schedule
    assert interleaved_schedule({"os": 2}, seed=0, length=1) in ([("os", 0)], [("os", 1)])


def test_same_seed_replays_the_same_instances(serial_venv: MultiTaskVectorEnv) -> None:
    first = serial_venv.reset(seed=11)[1]["group"].tolist()
    serial_venv.reset_some(range(8))
    assert serial_venv.reset(seed=11)[1]["group"].tolist() == first


def test_reset_infos_are_dict_of_arrays_with_masks(serial_venv: MultiTaskVectorEnv) -> None:
    observations, infos = serial_venv.reset(seed=0)
    assert serial_venv.observation_space.contains(observations)
    assert infos["_task_id"].all() and infos["task_id"].tolist() == list(serial_venv.task_ids)
    assert infos["max_turns"].tolist() == [4, 4, 2, 2, 4, 4, 2, 2]
    assert infos["system_prompt"][0] == "Find the word."
    assert [tool["function"]["name"] for tool in infos["tools"][0]] == ["say", "wait", "die"]


def test_disabled_mode_steps_all_and_resets_only_the_masked_slots(
    serial_venv: MultiTaskVectorEnv,
) -> None:
    serial_venv.reset(seed=0)
    experts = serial_venv.call("expert_action")
    actions = [
        experts[0],
        say("no"),
        say("no"),
        say("no"),
        say("no"),
        say("no"),
        say("no"),
        say("no"),
    ]
    _, rewards, terminated, truncated, infos = serial_venv.step(actions)
    assert rewards.tolist() == [1.0] + [0.0] * 7
    assert terminated.tolist() == [True] + [False] * 7
    assert not truncated.any()
    assert (
        infos["status"][0] == "completed"
        and infos["success"][0]
        and infos["_success"].tolist() == [True] + [False] * 7
    )
    with pytest.raises(RuntimeError, match=r"slots \[0\] have ended"):
        serial_venv.step(actions)
    mask = np.array([True] + [False] * 7)
    observations, infos = serial_venv.reset(options={"reset_mask": mask})
    assert infos["_task_id"].tolist() == mask.tolist()
    assert observations[0].startswith("Guess the word of guess-train-")
    _, rewards, terminated, truncated, _ = serial_venv.step([say("no")] * 8)
    # the count slots (2 and 3, 6 and 7) reach their limit of 2 turns together
    assert truncated.tolist() == [False, False, True, True, False, False, True, True]
    assert rewards[2] == pytest.approx(-0.2)


def test_next_step_mode_resets_a_finished_slot_on_the_following_step() -> None:
    venv = MultiTaskVectorEnv(
        {GUESS: 2}, group_size=2, backend="serial", autoreset_mode=AutoresetMode.NEXT_STEP
    )
    try:
        venv.reset(seed=0)
        expert = venv.call("expert_action")
        _, rewards, terminated, _, _ = venv.step([expert[0], say("no")])
        assert rewards.tolist() == [1.0, 0.0] and terminated.tolist() == [True, False]
        observations, rewards, terminated, truncated, infos = venv.step([say("ignored"), say("no")])
        assert observations[0].startswith("Guess the word of ")
        assert rewards.tolist() == [0.0, 0.0] and not terminated.any() and not truncated.any()
        assert infos["turn"].tolist() == [0, 2] and infos["_tools"].tolist() == [True, False]
        with pytest.raises(ValueError, match="reset_mask is only for"):
            venv.reset(options={"reset_mask": np.array([True, False])})
    finally:
        venv.close()


@pytest.mark.parametrize("backend", ["serial", "subprocess"])
def test_step_some_steps_only_the_named_slots(backend: str) -> None:
    venv = MultiTaskVectorEnv({GUESS: 2, COUNT: 2}, group_size=2, backend=backend)
    try:
        resets = venv.reset_some([3, 0])
        assert [index for index, _, _ in resets] == [3, 0]
        assert resets[0][2]["task_id"] == "count" and resets[1][2]["task_id"] == "guess"
        expert = venv.call_some([3], "expert_action")[0]
        outcomes = venv.step_some([3, 0], [expert, say("no")])
        assert outcomes == [
            StepOutcome(3, "right", 1.0, True, False, outcomes[0].info),
            StepOutcome(0, "not no", 0.0, False, False, outcomes[1].info),
        ]
        assert outcomes[0].done and outcomes[0].info["group"] == venv.group_keys[3]
        assert outcomes[1].info["turn"] == 1 and venv.running.tolist() == [
            True,
            False,
            False,
            False,
        ]
        assert venv.trajectory(3) == [
            {"observation": resets[0][1]},
            {"action": expert, "observation": "right", "reward": 1.0, "status": "completed"},
        ]
        with pytest.raises(
            RuntimeError, match=r"slot 3 has no running episode; reset_some\(\[3\]\)"
        ):
            venv.step_some([3], [say("x")])
    finally:
        venv.close()


def test_abort_some_ends_episodes_with_the_penalty_and_status(
    serial_venv: MultiTaskVectorEnv,
) -> None:
    serial_venv.reset(seed=0)
    outcomes = serial_venv.abort_some([1, 2], Status.AGENT_CONTEXT_LIMIT)
    assert [(o.index, o.reward, o.terminated, o.info["status"]) for o in outcomes] == [
        (1, -0.2, True, "agent_context_limit"),
        (2, -0.2, True, "agent_context_limit"),
    ]
    with pytest.raises(ValueError, match="abnormal status, got completed"):
        serial_venv.abort_some([3], Status.COMPLETED)
    with pytest.raises(RuntimeError, match="slot 1 has no running episode to abort"):
        serial_venv.abort_some([1])


def test_bad_arguments_are_clear_errors() -> None:
    with pytest.raises(ValueError, match="not a multiple of group_size=4"):
        MultiTaskVectorEnv({GUESS: 2}, group_size=4, backend="serial")
    with pytest.raises(ValueError, match=r"slots 0..1 form one group but run different envs"):
        MultiTaskVectorEnv([GUESS, COUNT], group_size=2, backend="serial")
    with pytest.raises(ValueError, match="backend must be one of"):
        MultiTaskVectorEnv({GUESS: 1}, backend="threads")
    with pytest.raises(ValueError, match="SAME_STEP would hide"):
        MultiTaskVectorEnv({GUESS: 1}, backend="serial", autoreset_mode=AutoresetMode.SAME_STEP)
    venv = MultiTaskVectorEnv([GUESS, (COUNT, {"max_turns": 1})], backend="serial")
    try:
        assert venv.task_ids == ("guess", "count")
        with pytest.raises(ValueError, match=r"reset_mask must be a bool array of shape \(2,\)"):
            venv.reset(options={"reset_mask": np.array([1, 0])})
        with pytest.raises(ValueError, match="a seed can only be given when every slot resets"):
            venv.reset(seed=1, options={"reset_mask": np.array([True, False])})
        venv.reset()
        with pytest.raises(IndexError, match=r"slot index 2 out of range 0..1"):
            venv.step_some([2], [say("x")])
        with pytest.raises(ValueError, match="slot indices must be distinct"):
            venv.step_some([0, 0], [say("x"), say("y")])
        with pytest.raises(ValueError, match="got 1 actions for 2 slots"):
            venv.step_some([0, 1], [say("x")])
        with pytest.raises(ValueError, match="expected 2 actions, got 3"):
            venv.step([say("x")] * 3)
        outcome = venv.step_some([1], ["no call at all"])[0]
        assert outcome.info["status"] == "agent_invalid_action"
    finally:
        venv.close()


def test_a_sub_env_that_cannot_be_built_is_a_clear_error() -> None:
    with pytest.raises(WorkerError, match="unexpected keyword argument 'colour'"):
        MultiTaskVectorEnv({GUESS: 1}, env_kwargs={GUESS: {"colour": "red"}}, backend="subprocess")


def test_a_slow_env_does_not_hold_back_the_outcomes_of_fast_ones() -> None:
    venv = MultiTaskVectorEnv({GUESS: 2}, backend="subprocess")
    try:
        venv.reset(seed=0)
        venv.submit_steps([0, 1], [wait(2.0), say("quick")])
        first = venv.collect_steps()
        assert [(outcome.index, outcome.observation) for outcome in first] == [(1, "not quick")]
        second = venv.collect_steps()
        assert [(outcome.index, outcome.observation) for outcome in second] == [(0, "waited")]
        assert venv.collect_steps(timeout=0.0) == []
    finally:
        venv.close()


def test_a_dead_worker_ends_its_episode_as_task_error_and_is_restarted() -> None:
    venv = MultiTaskVectorEnv({GUESS: 2}, group_size=2, backend="subprocess")
    try:
        _, infos = venv.reset(seed=0)
        old_pid = int(infos["worker_pid"][0])
        venv.step_some([0], [say("first")])
        outcomes = venv.step_some([0, 1], [DIE, say("fine")])
        lost = outcomes[0]
        assert (lost.reward, lost.terminated, lost.truncated) == (-0.2, True, False)
        assert lost.info["status"] == "task_error" and lost.info["worker_restarted"] is True
        assert lost.info["error"] == "worker exited with code 3"
        assert lost.info["turn"] == 2 and lost.info["group"] == infos["group"][0]
        assert [step.get("action") for step in lost.info["trajectory"]] == [None, say("first"), DIE]
        assert lost.info["trajectory"][1]["observation"] == "not first"
        assert outcomes[1].info["status"] == "running" and not running(old_pid)
        info = venv.reset_some([0])[0][2]
        assert info["worker_pid"] != old_pid
        expert = venv.call_some([0], "expert_action")[0]
        assert venv.step_some([0], [expert])[0].reward == 1.0
    finally:
        venv.close()


def test_slots_sharing_a_dead_worker_end_as_task_error_at_their_next_step() -> None:
    venv = MultiTaskVectorEnv({GUESS: 2}, backend="subprocess", envs_per_worker=2)
    try:
        venv.reset(seed=0)
        assert len(venv.pool.worker_slots) == 1
        assert venv.step_some([0], [DIE])[0].info["worker_restarted"]
        survivor = venv.step_some([1], [say("x")])[0]
        assert survivor.info["status"] == "task_error" and survivor.info["worker_restarted"]
        assert survivor.observation.startswith("Task error: worker exited with code 3")
    finally:
        venv.close()


def test_close_leaves_no_process_sandbox_or_temp_dir_behind() -> None:
    venv = MultiTaskVectorEnv(
        {GUESS: 3}, env_kwargs={GUESS: {"hold_resources": True}}, backend="subprocess"
    )
    temp_root = venv.pool.temp_root
    assert temp_root is not None and temp_root.is_dir()
    _, infos = venv.reset(seed=0)
    workers = list(venv.pool.pids())  # type: ignore[attr-defined]
    children = [int(pid) for pid in infos["child_pid"]]
    scratch = [str(path) for path in infos["scratch"]]
    assert len(workers) == 3 and all(map(running, workers + children))
    assert all(Path(path).is_dir() for path in scratch)
    assert all(path.startswith(str(temp_root)) for path in scratch)
    venv.pool.kill_worker(0)  # its episode's child and temp dir must go too
    assert venv.step_some([0], [say("x")])[0].info["worker_restarted"]
    deadline = time.monotonic() + 10
    while running(children[0]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not running(children[0]) and not Path(scratch[0]).exists()
    venv.reset_some([0])
    workers += venv.pool.pids()  # type: ignore[attr-defined]
    venv.close()
    venv.close()  # idempotent
    assert not any(map(running, workers + children))
    assert not any(Path(path).exists() for path in scratch)
    assert not temp_root.exists()


def test_env_spec_accepts_a_factory() -> None:
    from support.vector_test_envs import CountEnv

    venv = MultiTaskVectorEnv([SubEnvSpec(CountEnv, {"max_turns": 1})], backend="serial")
    try:
        _, info = venv.reset_some([0])[0][1:]
        assert info["task_id"] == "count" and info["max_turns"] == 1
    finally:
        venv.close()


@pytest.mark.ray
@pytest.mark.slow
def test_ray_backend_runs_the_same_api_and_restarts_a_dead_actor() -> None:
    pytest.importorskip("ray")
    venv = MultiTaskVectorEnv(
        {GUESS: 2, COUNT: 2}, group_size=2, backend="ray", backend_options={"num_cpus": 2}
    )
    temp_root = venv.pool.temp_root
    assert temp_root is not None
    try:
        _, infos = venv.reset(seed=0)
        assert infos["task_id"].tolist() == ["guess", "guess", "count", "count"]
        expert = venv.call_some([2], "expert_action")[0]
        outcomes = venv.step_some([2, 0], [expert, DIE])
        assert outcomes[0].reward == 1.0 and outcomes[0].info["status"] == "completed"
        assert outcomes[1].info["status"] == "task_error" and outcomes[1].info["worker_restarted"]
        assert outcomes[1].info["error"].startswith("ray actor died")
        venv.reset_some([0])
        assert venv.step_some([0], [say("x")])[0].observation == "not x"
    finally:
        venv.close()
    import ray

    assert not ray.is_initialized()
    assert not temp_root.exists()


@pytest.mark.parametrize("backend", ["serial", "subprocess"])
def test_expert_action_lets_each_slots_expert_act_inside_its_worker(backend: str) -> None:
    from agentgym_eppo.vector import EXPERT_ACTION

    venv = MultiTaskVectorEnv({GUESS: 2, COUNT: 2}, group_size=2, backend=backend)
    try:
        venv.reset(seed=0)
        outcomes = venv.step_some(range(4), [EXPERT_ACTION] * 4)
        assert [o.reward for o in outcomes] == [1.0] * 4
        words = [o.info["expert_action"]["arguments"]["word"] for o in outcomes]
        assert [venv.trajectory(i)[1]["action"] for i in range(4)] == [say(w) for w in words]
    finally:
        venv.close()
