"""Evaluation: per-task success on a held-out split, for a local policy or any
OpenAI-compatible chat endpoint (SGLang/vLLM servers, hosted APIs).

Local: every instance of the split (or the first ``max_instances`` of a shuffled pass)
is played once through a ``MultiTaskVectorEnv`` with one slot per episode, batched
across tasks, greedy by default. The result is ``RUN_DIR/eval_<stage>.json``:
``{"stage", "split", "tasks": {task: {"success", "reward", "n", "statuses"}},
"mean_success"}`` (``mean_success`` is the mean over tasks).
"""

from __future__ import annotations

import json
import urllib.request
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
from transformers import PreTrainedTokenizerBase

from agentgym_eppo.registration import ENVIRONMENTS

from .engine import RolloutEngine
from .rollout import Episode, RolloutLimits, play_episodes, slot_info, start_episode

GREEDY = RolloutLimits(temperature=0.0)


def summarize(episodes: Sequence[Episode], stage: str, split: str) -> dict[str, Any]:
    """The eval JSON of a set of finished episodes."""
    by_task: dict[str, list[Episode]] = defaultdict(list)
    for episode in episodes:
        by_task[episode.task_id].append(episode)
    tasks: dict[str, dict[str, Any]] = {}
    for task_id in sorted(by_task):
        played = by_task[task_id]
        tasks[task_id] = {
            "success": sum(float(e.success) for e in played) / len(played),
            "reward": sum(e.reward for e in played) / len(played),
            "n": len(played),
            "statuses": dict(Counter(e.status for e in played)),
        }
    mean = sum(float(t["success"]) for t in tasks.values()) / len(tasks) if tasks else 0.0
    return {"stage": stage, "split": split, "tasks": tasks, "mean_success": mean}


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
    seed: int = 0,
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
    names no task of ``tasks`` is refused.
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
        seed=seed,
    )
    finished: list[Episode] = []
    try:
        observations, infos = venv.reset(seed=seed)
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


def _task_size(name: str, split: str, kwargs: Mapping[str, Any]) -> tuple[str, int]:
    """``(info["task_id"], number of instances in split)`` of a task id or env id."""
    env_id = ENVIRONMENTS[name][0] if name in ENVIRONMENTS else name
    env = gym.make(env_id, split=split, **kwargs)
    try:
        unwrapped: Any = env.unwrapped
        return str(unwrapped.task_id), int(unwrapped.num_tasks)
    finally:
        env.close()


def write_eval(run_dir: Path, result: Mapping[str, Any]) -> Path:
    path = Path(run_dir) / f"eval_{result['stage']}.json"
    path.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return path


def chat_completion(
    base_url: str,
    model: str,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]],
    *,
    api_key: str | None = None,
    temperature: float = 0.0,
    max_tokens: int = 1024,
    timeout: float = 120.0,
) -> dict[str, Any]:
    """POST ``/chat/completions`` (OpenAI's schema) and return the first choice's message."""
    body = json.dumps(
        {
            "model": model,
            "messages": messages,
            "tools": tools,
            "temperature": temperature,
            "max_tokens": max_tokens,
        }
    ).encode("utf-8")
    request = urllib.request.Request(
        base_url.rstrip("/") + "/chat/completions",
        data=body,
        headers={"Content-Type": "application/json"}
        | ({"Authorization": f"Bearer {api_key}"} if api_key else {}),
    )
    with urllib.request.urlopen(request, timeout=timeout) as response:
        reply = json.loads(response.read().decode("utf-8"))
    return dict(reply["choices"][0]["message"])


def evaluate_endpoint(
    base_url: str,
    model: str,
    tasks: Sequence[str],
    *,
    split: str = "dev",
    max_instances: int | None = None,
    api_key: str | None = None,
    temperature: float = 0.0,
    max_tokens: int = 1024,
    env_kwargs: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """AgentBench-style evaluation of a served model: the model gets the task's system
    prompt, tool schemas and the dialogue; its message (a ``tool_calls`` entry or text)
    is the action. Instances are played in order, one at a time."""
    episodes: list[Episode] = []
    for task_id in tasks:
        env_id = ENVIRONMENTS[task_id][0] if task_id in ENVIRONMENTS else task_id
        env = gym.make(env_id, split=split, **dict((env_kwargs or {}).get(task_id, {})))
        try:
            count = int(env.unwrapped.num_tasks)  # type: ignore[attr-defined]
            for index in range(count if max_instances is None else min(count, max_instances)):
                episodes.append(
                    _play_endpoint_episode(
                        env, index, base_url, model, api_key, temperature, max_tokens
                    )
                )
        finally:
            env.close()
    return summarize(episodes, "endpoint", split)


def _play_endpoint_episode(
    env: gym.Env[Any, Any],
    index: int,
    base_url: str,
    model: str,
    api_key: str | None,
    temperature: float,
    max_tokens: int,
) -> Episode:
    from .chat import Transcript

    observation, info = env.reset(options={"index": index})
    tools = list(info.get("tools") or [])
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": info["system_prompt"]},
        {"role": "user", "content": observation},
    ]
    episode = Episode(
        slot=index,
        task_id=str(info["task_id"]),
        group=str(index),
        sample_id=str(info["sample_id"]),
        transcript=Transcript([]),
    )
    while True:
        message = chat_completion(
            base_url,
            model,
            messages,
            tools,
            api_key=api_key,
            temperature=temperature,
            max_tokens=max_tokens,
        )
        calls = message.get("tool_calls") or []
        action: Any = (
            {"role": "assistant", "tool_calls": calls[:1]}
            if calls
            else (message.get("content") or "")
        )
        observation, reward, terminated, truncated, step_info = env.step(action)
        episode.turns += 1
        messages.append(
            {
                "role": "assistant",
                "content": message.get("content") or "",
                **({"tool_calls": calls[:1]} if calls else {}),
            }
        )
        if terminated or truncated:
            episode.reward = float(reward)
            episode.status = str(step_info.get("status"))
            episode.success = bool(step_info.get("success", False))
            episode.score = float(step_info.get("score", 0.0))
            return episode
        tool_message: dict[str, Any] = {"role": "tool", "content": observation}
        if calls and calls[0].get("id"):
            tool_message["tool_call_id"] = calls[0]["id"]
        messages.append(tool_message)
