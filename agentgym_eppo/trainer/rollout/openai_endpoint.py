"""Playing the tasks through an OpenAI-compatible chat endpoint (SGLang/vLLM servers,
hosted APIs): AgentBench's way of evaluating a served model.

The model gets the task's system prompt, tool schemas and the dialogue as chat messages;
its message (a ``tool_calls`` entry or plain text) is the action. Results use the same
JSON as the local evaluation (:func:`agentgym_eppo.trainer.rollout.evaluation.summarize`).

The server renders the messages with its template, special tokens parsed, so the task
text and every reply are escaped: the common control-token forms, and every special
token of the served model's tokenizer when it is given (``tokenizer``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym

from agentgym_eppo.trainer.rollout.evaluation import resolve_task, summarize
from agentgym_eppo.wrappers.chat import ControlTokenEscaper, tokenizer_escaper

from .chat import Transcript
from .episodes import Episode
from .openai_http import DEFAULT_LIMITS, EndpointError, EndpointLimits, chat_completion

__all__ = [
    "ENDPOINT_ERROR",
    "EndpointError",
    "EndpointLimits",
    "chat_completion",
    "evaluate_endpoint",
]


ENDPOINT_ERROR = "endpoint_error"
"""The status of an episode whose request failed: it has no outcome of the model's."""


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
    limits: EndpointLimits = DEFAULT_LIMITS,
    tokenizer: Any = None,
) -> dict[str, Any]:
    """AgentBench-style evaluation of a served model: the model gets the task's system
    prompt, tool schemas and the dialogue; its message (a ``tool_calls`` entry or text)
    is the action. Instances are played in order, one at a time. ``tokenizer``: the
    served model's, whose special tokens are escaped in the environment's text (without
    it, only the common control-token forms are).

    The result is :func:`summarize`'s JSON over the episodes the model finished, plus
    ``failed`` (each episode whose request failed: task, instance, turns and the
    :class:`EndpointError` line; status ``endpoint_error``), ``not_played`` (instances
    per task left unplayed after ``limits.max_consecutive_failures`` failures in a row or
    an interrupt), ``stopped`` (why, or None) and ``partial`` (true when any instance has
    no outcome of the model's). A failed request costs its episode, never the others."""
    finished: list[Episode] = []
    failed: list[Episode] = []
    not_played: dict[str, int] = {}
    stopped: str | None = None
    streak = 0
    escape = tokenizer_escaper(tokenizer)
    for task_id in tasks:
        env = gym.make(
            resolve_task(task_id), split=split, **dict((env_kwargs or {}).get(task_id, {}))
        )
        try:
            count = int(env.unwrapped.num_tasks)  # type: ignore[attr-defined]
            selected = count if max_instances is None else min(count, max_instances)
            for index in range(selected):
                if stopped is None:
                    try:
                        episode = _play_endpoint_episode(
                            env,
                            index,
                            base_url,
                            model,
                            api_key,
                            temperature,
                            max_tokens,
                            limits,
                            escape,
                        )
                    except KeyboardInterrupt:
                        stopped = "interrupted"
                    else:
                        ok = episode.status != ENDPOINT_ERROR
                        (finished if ok else failed).append(episode)
                        streak = 0 if ok else streak + 1
                        if streak >= limits.max_consecutive_failures:
                            stopped = f"{streak} endpoint failures in a row"
                        continue
                name = str(env.unwrapped.task_id)  # type: ignore[attr-defined]
                not_played[name] = not_played.get(name, 0) + 1
        finally:
            env.close()
    result = summarize(finished, "endpoint", split)
    result["failed"] = [
        {"task_id": e.task_id, "sample_id": e.sample_id, "status": e.status,
         "turns": e.turns, "error": e.info["error"]}
        for e in failed
    ]  # fmt: skip
    result["not_played"] = not_played
    result["stopped"] = stopped
    result["partial"] = bool(failed or not_played)
    return result


def _play_endpoint_episode(
    env: gym.Env[Any, Any],
    index: int,
    base_url: str,
    model: str,
    api_key: str | None,
    temperature: float,
    max_tokens: int,
    limits: EndpointLimits,
    escape: ControlTokenEscaper,
) -> Episode:
    observation, info = env.reset(options={"index": index})
    tools = list(info.get("tools") or [])
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": info["system_prompt"]},
        {"role": "user", "content": escape(observation)},
    ]
    episode = Episode(
        slot=index,
        task_id=str(info["task_id"]),
        group=str(index),
        sample_id=str(info["sample_id"]),
        transcript=Transcript([]),
    )
    while True:
        try:
            message = chat_completion(
                base_url,
                model,
                messages,
                tools,
                api_key=api_key,
                temperature=temperature,
                max_tokens=max_tokens,
                limits=limits,
            )
        except EndpointError as error:  # this episode has no outcome; the next reset starts over
            episode.status = ENDPOINT_ERROR
            episode.info["error"] = str(error)
            return episode
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
        # the server renders and tokenizes the messages: the env's text is escaped
        reply = escape(observation)
        tool_message: dict[str, Any] = {"role": "tool", "content": reply}
        if calls and calls[0].get("id"):
            tool_message["tool_call_id"] = calls[0]["id"]
        messages.append(tool_message)
