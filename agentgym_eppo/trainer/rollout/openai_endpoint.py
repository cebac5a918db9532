"""Playing the tasks through an OpenAI-compatible chat endpoint (SGLang/vLLM servers,
hosted APIs): AgentBench's way of evaluating a served model.

The model gets the task's system prompt, tool schemas and the dialogue as chat messages;
its message (a ``tool_calls`` entry or plain text) is the action. Results use the same
JSON as the local evaluation (:func:`agentgym_eppo.trainer.evaluation.summarize`).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym

from agentgym_eppo.trainer.evaluation import resolve_task, summarize

from .chat import Transcript
from .episodes import Episode


class EndpointError(RuntimeError):
    """The endpoint could not be reached or did not answer as an OpenAI chat API."""


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
    url = request.full_url
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            reply = json.loads(response.read().decode("utf-8"))
    except urllib.error.HTTPError as error:
        answer = error.read().decode("utf-8", "replace").strip().replace("\n", " ")[:200]
        raise EndpointError(f"{url} answered HTTP {error.code}: {answer or error.reason}") from None
    except (urllib.error.URLError, OSError) as error:  # refused, unknown host, timeout
        reason = getattr(error, "reason", error)
        raise EndpointError(f"cannot reach {url}: {reason}") from None
    except json.JSONDecodeError as error:
        raise EndpointError(f"{url} answered something that is not JSON ({error.msg})") from None
    try:
        return dict(reply["choices"][0]["message"])
    except (KeyError, IndexError, TypeError):
        raise EndpointError(
            f"{url} answered without choices[0].message (not an OpenAI chat completion)"
        ) from None


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
        env = gym.make(
            resolve_task(task_id), split=split, **dict((env_kwargs or {}).get(task_id, {}))
        )
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
