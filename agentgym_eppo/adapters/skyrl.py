"""SkyRL-gym adapter: our environments as a ``skyrl_gym`` ``BaseTextEnv``.

SkyRL builds an env per sample as ``cls(env_config=..., extras=...)``, calls
``init(prompt)`` (chat messages) and then ``step(model_text)`` until ``done``; each
step returns ``observations`` (new chat messages), ``reward``, ``done`` and
``metadata``. :class:`AgentGymTextEnv` reads the task from ``extras`` (``task``: a task
id or Gymnasium id, ``task_index`` or ``sample_id``) and the env's keywords from
``env_config["env_kwargs"]``, appends the task text to the
prompt's last user message, and answers each reply with the tool's output as a user
message. Register it with :func:`register_skyrl_env` (id ``agentgym_eppo``).

SkyRL renders those messages with the policy's chat template, special tokens parsed,
and never shows the env its tokenizer; so ``env_config["tokenizer"]`` must name it (the
policy's model folder or name, or a tokenizer object): every special token of it is
escaped in the environment's text, which could otherwise spell SmolLM2's
``<file_sep>`` or any other and have it read as that token.

Importing this module needs ``skyrl_gym`` (``pip install skyrl-gym``; tested with
0.4.0, which installs beside this project's torch and transformers):
:class:`AgentGymTextEnv` is a real subclass of its ``BaseTextEnv``.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import skyrl_gym
from skyrl_gym.envs.base_text_env import BaseTextEnv

from agentgym_eppo.trainer.training.models import load_tokenizer
from agentgym_eppo.wrappers.session import EpisodeSession

SKYRL_ENV_ID = "agentgym_eppo"

_shared_tokenizer = functools.lru_cache(maxsize=4)(load_tokenizer)
"""SkyRL builds an env per sample: the tokenizer a name gives is loaded once."""


class AgentGymTextEnv(BaseTextEnv):
    """One episode of one of our environments, in SkyRL's text-env protocol."""

    def __init__(
        self, env_config: Mapping[str, Any] | None = None, extras: Mapping[str, Any] | None = None
    ) -> None:
        super().__init__()
        extras = dict(extras or {})
        config = dict(env_config or {})
        task = extras.get("task") or config.get("task")
        if not task:
            raise ValueError(
                "AgentGymTextEnv needs extras['task'] (e.g. 'db' or 'AgentBench-DB-v0')"
            )
        tokenizer = config.get("tokenizer")
        if tokenizer is None:
            raise ValueError(
                "AgentGymTextEnv needs env_config['tokenizer']: the policy's tokenizer (its "
                "model folder or name), whose special tokens are escaped in the env's text"
            )
        if isinstance(tokenizer, str):
            tokenizer = _shared_tokenizer(tokenizer)
        self.session = EpisodeSession(
            str(task), dict(config.get("env_kwargs") or {}), tokenizer=tokenizer
        )
        self.task_index = extras.get("task_index")
        self.sample_id = extras.get("sample_id")
        self.max_turns = int(getattr(self.session.env.unwrapped, "max_turns", 1))

    def init(self, prompt: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """Start the episode; the prompt's last user message gains the task text."""
        task_text = self.session.start(
            index=int(self.task_index) if self.task_index is not None else None,
            sample_id=self.sample_id,
        )
        messages = [dict(message) for message in prompt]
        if messages and messages[-1].get("role") == "user":
            content = messages[-1].get("content") or ""
            messages[-1]["content"] = f"{content}\n{task_text}" if content else task_text
        else:
            messages.append({"role": "user", "content": task_text})
        self.turns = 0
        return messages, {"task_id": self.session.task_id, "tools": self.session.tools}

    def step(self, action: str) -> dict[str, Any]:
        """Run the reply's call; ``BaseTextEnvStepOutput`` as a plain dict."""
        self.turns += 1
        observation, reward, done, info = self.session.act(action)
        return {
            "observations": [] if done else [{"role": "user", "content": observation}],
            "reward": reward,
            "done": done,
            "metadata": info,
            "postprocessed_action": None,
        }

    def get_metrics(self) -> dict[str, Any]:
        info = self.session.info
        return {
            "success": float(bool(info.get("success", False))),
            "score": float(info.get("score", 0.0)),
            "turns": self.turns,
        }

    def close(self) -> None:
        self.session.close()


def register_skyrl_env(env_id: str = SKYRL_ENV_ID) -> None:
    """Register :class:`AgentGymTextEnv` with ``skyrl_gym`` under ``env_id`` (once)."""
    if env_id not in skyrl_gym.envs.registration.registry:
        skyrl_gym.register(id=env_id, entry_point=f"{__name__}:AgentGymTextEnv")
