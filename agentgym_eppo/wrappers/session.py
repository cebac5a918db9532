"""One episode of one environment, driven call by call: what every adapter shares.

Third-party RL libraries differ in who holds the conversation (TRL, verl and OpenAI
clients call tools by name; SkyRL and OpenRLHF hand over the model's text), but each
needs the same things from an env: start an episode on a chosen instance, run a tool
call or a text action, know when the episode is over and what it earned, and release
the env's resources. :class:`EpisodeSession` is that, over any ``AgentBench-*`` env.

Every library it serves renders the text it returns with a chat template, so the task
text and every observation come out with their control-token forms escaped: a database
row or a shell's output that spells ``<|im_end|>`` cannot close the tool turn and forge
an assistant turn in the model's context. Given the tokenizer that renders it, every
special token of that tokenizer is escaped too
(:func:`~agentgym_eppo.wrappers.chat.tokenizer_escaper`); without it, the common forms
(:data:`~agentgym_eppo.wrappers.chat.escape_control_tokens`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium as gym

from agentgym_eppo.core import Status
from agentgym_eppo.vector.layout import resolve_env_id

from .chat import tokenizer_escaper

EPISODE_OVER = "The episode is over; no further tool calls are accepted."


def make_env(task: str, env_kwargs: Mapping[str, Any] | None = None) -> gym.Env[Any, Any]:
    """``gym.make`` of a task id (``"db"``) or a Gymnasium id, with ``env_kwargs``."""
    return gym.make(resolve_env_id(task), **dict(env_kwargs or {}))


class EpisodeSession:
    """Owns one env; :meth:`start` begins an episode, :meth:`call`/:meth:`act` step it.

    ``reward`` is the episode's return so far; :meth:`final_reward` ends a still
    running episode (status ``unfinished_status``, the abort penalty) so that a rollout
    the model abandoned scores like any other abnormal end. ``tokenizer``: the one that
    will encode the returned text, whose special tokens are escaped in it.
    """

    def __init__(
        self,
        task: str,
        env_kwargs: Mapping[str, Any] | None = None,
        *,
        unfinished_status: Status = Status.AGENT_INVALID_ACTION,
        tokenizer: Any = None,
    ) -> None:
        self.task = task
        self.escape = tokenizer_escaper(tokenizer)
        self.env = make_env(task, env_kwargs)
        self.unfinished_status = unfinished_status
        self.reward = 0.0
        self.done = True
        self.info: dict[str, Any] = {}
        self.reset_info: dict[str, Any] = {}
        self.turns = 0

    @property
    def task_id(self) -> str:
        return str(getattr(self.env.unwrapped, "task_id", self.task))

    @property
    def tools(self) -> list[dict[str, Any]]:
        """The env's tools as OpenAI function schemas."""
        return list(self.env.unwrapped.tool_schemas)  # type: ignore[attr-defined]

    @property
    def system_prompt(self) -> str:
        return str(self.env.unwrapped.system_prompt)  # type: ignore[attr-defined]

    def start(
        self, *, index: int | None = None, sample_id: str | None = None, seed: int | None = None
    ) -> str:
        """Begin an episode on instance ``index`` or ``sample_id``; returns the task text
        (control tokens escaped)."""
        options: dict[str, Any] = {}
        if sample_id is not None:
            options["sample_id"] = sample_id
        elif index is not None:
            options["index"] = int(index)
        observation, info = self.env.reset(seed=seed, options=options)
        self.reward, self.done, self.turns = 0.0, False, 0
        self.info, self.reset_info = dict(info), dict(info)
        return self.escape(str(observation))

    def call(self, name: str, arguments: Mapping[str, Any]) -> str:
        """Run one tool call; returns the observation (or a note once the episode is over)."""
        return self.act({"name": name, "arguments": dict(arguments)})[0]

    def act(self, action: Any) -> tuple[str, float, bool, dict[str, Any]]:
        """Step with any action the env accepts: ``(observation, reward, done, info)``, the
        observation's control tokens escaped."""
        if self.done:
            return EPISODE_OVER, 0.0, True, dict(self.info)
        observation, reward, terminated, truncated, info = self.env.step(action)
        self.turns += 1
        self.reward += float(reward)
        self.done = bool(terminated or truncated)
        self.info = dict(info)
        return self.escape(str(observation)), float(reward), self.done, dict(info)

    def final_reward(self) -> float:
        """The episode's return, ending it first with the abort penalty if it still runs."""
        if not self.done and self.reset_info:
            _, reward, _, _, info = self.env.unwrapped.abort(self.unfinished_status)  # type: ignore[attr-defined]
            self.reward += float(reward)
            self.done, self.info = True, dict(info)
        return self.reward

    def close(self) -> None:
        self.env.close()
