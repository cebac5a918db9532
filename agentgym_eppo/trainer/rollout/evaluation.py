"""Evaluation: per-task success of a local policy on a held-out split.

Every instance of the split (or the first ``max_instances`` of a shuffled pass)
is played once through a ``MultiTaskVectorEnv`` with one slot per episode, batched
across tasks, greedy by default. The result is ``RUN_DIR/eval_<stage>.json``:
``{"stage", "split", "tasks": {task: {"success", "reward", "n", "statuses"}},
"mean_success", "episodes"}`` (``mean_success`` is the mean over tasks; ``episodes``
lists every episode's task, instance, success, reward and status).
"""

from __future__ import annotations

import importlib
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym
from transformers import PreTrainedTokenizerBase

from agentgym_eppo.core.registry import UnknownNameError
from agentgym_eppo.registration import ENVIRONMENTS
from agentgym_eppo.trainer.rollout.engine import RolloutEngine
from agentgym_eppo.trainer.rollout.episodes import (
    Episode,
    RolloutLimits,
    episodes_by_task,
    play_episodes,
    slot_info,
    start_episode,
)
from agentgym_eppo.vector.layout import resolve_env_id

GREEDY = RolloutLimits(temperature=0.0)


def summarize(episodes: Sequence[Episode], stage: str, split: str) -> dict[str, Any]:
    """The eval JSON of a set of finished episodes."""
    tasks: dict[str, dict[str, Any]] = {}
    for task_id, played in episodes_by_task(episodes).items():
        tasks[task_id] = {
            "success": sum(float(e.success) for e in played) / len(played),
            "reward": sum(e.reward for e in played) / len(played),
            "n": len(played),
            "statuses": dict(Counter(e.status for e in played)),
        }
    mean = sum(float(t["success"]) for t in tasks.values()) / len(tasks) if tasks else 0.0
    # Every episode, so that two evaluations of the same instances compare pair by pair.
    records = [
        {"task_id": e.task_id, "sample_id": e.sample_id, "success": bool(e.success),
         "reward": float(e.reward), "status": e.status, "turns": e.turns}
        for e in sorted(episodes, key=lambda e: (e.task_id, e.sample_id))
    ]  # fmt: skip
    return {
        "stage": stage,
        "split": split,
        "tasks": tasks,
        "mean_success": mean,
        "episodes": records,
    }


def evaluate_policy(
    engine: RolloutEngine,
    tokenizer: PreTrainedTokenizerBase,
    tasks: Sequence[str],
    *,
    stage: str,
    split: str = "dev",
    max_instances: int | None = None,
    limits: RolloutLimits = GREEDY,
    slots_per_task: int = 16,
    backend: str = "serial",
    env_kwargs: Mapping[str, Mapping[str, Any]] | None = None,
    instance_seed: int = 0,
    prompt_style: str = "full",
    samples_per_instance: int = 1,
    instances_by_task: Mapping[str, int] | None = None,
) -> dict[str, Any]:
    """Play each selected instance of every task ``samples_per_instance`` times (one
    vector-env group per instance, so the attempts share it); return the eval JSON (see
    module). More than one attempt only means something with ``limits.temperature > 0``:
    it averages sampling noise out of a small dev set.

    ``instances_by_task`` (keyed on ``info["task_id"]``) overrides ``max_instances`` per
    task: a dev episode of OS costs ~160 tokens, one of ALFWorld up to the whole context,
    so an eval that wants many OS episodes cannot afford as many ALFWorld ones. A key that
    names no task of ``tasks`` is refused. ``instance_seed`` alone decides which instances
    are drawn (and their order), so two runs that differ in every other seed play the
    same instance ids; sampling follows torch's generator, which the caller seeds.
    """
    from agentgym_eppo.vector import MultiTaskVectorEnv

    quotas: dict[str, int] = {}  # by info["task_id"]
    layout: dict[str, int] = {}  # by the caller's names (task ids or env ids)
    by_task = dict(instances_by_task or {})
    for name in tasks:
        task_id, count = _task_size(name, split, (env_kwargs or {}).get(name, {}))
        limit = by_task.pop(task_id, max_instances)
        instances = count if limit is None else min(count, limit)
        quotas[task_id] = instances * samples_per_instance  # episodes to play
        layout[name] = max(1, min(slots_per_task, instances)) * samples_per_instance
    if by_task:
        raise ValueError(
            f"instances_by_task names task(s) {sorted(by_task)} that are not evaluated "
            f"(tasks: {sorted(quotas)})"
        )
    venv = MultiTaskVectorEnv(
        layout,
        group_size=samples_per_instance,
        split=split,
        env_kwargs=env_kwargs,
        backend=backend,
        seed=instance_seed,
    )
    finished: list[Episode] = []
    try:
        observations, infos = venv.reset(seed=instance_seed)
        starts = [(i, observations[i], slot_info(infos, i)) for i in range(venv.num_envs)]
        remaining = dict(quotas)
        while starts:
            episodes = [
                start_episode(tokenizer, i, obs, info, prompt_style) for i, obs, info in starts
            ]
            for episode in episodes:
                remaining[episode.task_id] -= 1
            finished.extend(play_episodes(venv, episodes, engine, tokenizer, limits))
            again: list[int] = []
            for task_id in quotas:
                slots = [i for i, t in enumerate(venv.task_ids) if t == task_id]
                again.extend(slots[: max(0, remaining[task_id])])
            starts = venv.reset_some(again) if again else []
    finally:
        venv.close()
    return summarize(finished, stage, split)


def resolve_task(name: str) -> str:
    """The Gymnasium id of a task name: a task id (``db``) or a registered Gymnasium id
    (``AgentBench-DB-v0``, or ``module:Env-v0`` whose module registers it on import).

    Raises :class:`UnknownNameError` (one line: the known task ids, the closest one).
    """
    env_id = resolve_env_id(name)
    module, _, registered = env_id.rpartition(":")
    try:
        if module:
            importlib.import_module(module)
        gym.spec(registered)
    except (gym.error.Error, ImportError):
        ENVIRONMENTS.lookup(name)  # raises, naming the task ids
        raise UnknownNameError(f"task {name!r}: no Gymnasium id {env_id!r} is registered") from None
    return env_id


def _task_size(name: str, split: str, kwargs: Mapping[str, Any]) -> tuple[str, int]:
    """``(info["task_id"], number of instances in split)`` of a task id or env id."""
    env = gym.make(resolve_task(name), split=split, **kwargs)
    try:
        unwrapped: Any = env.unwrapped
        return str(unwrapped.task_id), int(unwrapped.num_tasks)
    finally:
        env.close()
