"""The demonstrators whose episodes the model is pretrained on.

The expert (each environment's ``expert_action``) solves an instance; the hasty
demonstrator answers at its first turn with the task's answer call
(:func:`hasty_answers`), before any tool has shown it anything. Each episode is an
:class:`~agentgym_eppo.trainer.training.sft.ExpertEpisode` whose ``demonstrator`` says
which one played it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from agentgym_eppo.registration import ENVIRONMENTS

from ...rollout.chat import action_text
from ..sft import ExpertEpisode


def hasty_answers() -> dict[str, Mapping[str, Any]]:
    """The hasty demonstrator's one call per task: the task's answer tool at the first
    turn, before any tool has shown it anything (``data.hasty``), for every registered
    task that names one (:attr:`~agentgym_eppo.registration.TaskSpec.blind_answer`). A
    policy that has imitated it sometimes answers blind; RL can learn not to, and that
    lesson holds on every instance."""
    return {task: spec.blind_answer for task, spec in ENVIRONMENTS.items() if spec.blind_answer}


def play_expert(env: Any, index: int) -> ExpertEpisode:
    """The expert's episode of instance ``index`` of ``env`` (solved or not)."""
    return _play(env, index, lambda: action_text(env.unwrapped.expert_action()), "expert")


def play_hasty(env: Any, index: int, answer: Mapping[str, Any]) -> ExpertEpisode:
    """The hasty demonstrator's episode of instance ``index``: ``answer`` at the first
    turn, which ends it (every entry of :func:`hasty_answers` is its task's answer call)."""
    return _play(env, index, lambda: action_text(answer), "hasty")


def _play(env: Any, index: int, next_action: Callable[[], str], who: str) -> ExpertEpisode:
    observation, info = env.reset(options={"index": index})
    episode = ExpertEpisode(
        task_id=str(info["task_id"]),
        sample_id=str(info["sample_id"]),
        system_prompt=str(info["system_prompt"]),
        tools=list(info.get("tools") or []),
        task_text=observation,
        demonstrator=who,
    )
    done = False
    while not done:
        action = next_action()
        observation, reward, terminated, truncated, info = env.step(action)
        episode.actions.append(action)
        episode.observations.append(observation)
        done = terminated or truncated
    episode.reward = float(reward)
    episode.success = bool(info.get("success", False))
    return episode
