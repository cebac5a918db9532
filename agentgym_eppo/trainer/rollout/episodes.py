"""Multi-turn rollouts: the policy plays every slot of a vector env to the end of its episode.

:func:`play_episodes` drives anything with ``MultiTaskVectorEnv``'s LLM-rollout API
(``step_some``/``abort_some``; episodes already reset): each round, every slot still
running gets one assistant turn from the engine (one batched generate call), the turns
go to the environments in one ``step_some``, and the replies are appended to the
transcripts as template tokens. Limits: the environment's turn limit, the tokens per
turn, and the episode's total context; an episode that would outgrow the context ends
through ``abort_some(..., AGENT_CONTEXT_LIMIT)`` with the abort penalty.

An engine that is a :class:`ScoringEngine` (the in-process
:class:`~agentgym_eppo.trainer.rollout.hf.HFGenerateEngine`) also reports each sampled
token's log-probability and entropy; the episode keeps them (:attr:`Episode.sampled`),
and the update can take its old-policy log-probs from them instead of a scoring forward.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from transformers import PreTrainedTokenizerBase

from agentgym_eppo.core import Status
from agentgym_eppo.trainer.algorithms import defaults as d

from .chat import Transcript, observation_token_ids, prompt_token_ids
from .engine import RolloutEngine


class SlotEnv(Protocol):
    """The part of ``MultiTaskVectorEnv``'s rollout API the rollout loop uses."""

    def step_some(self, indices: Sequence[int], actions: Sequence[Any]) -> Sequence[Any]: ...

    def abort_some(self, indices: Sequence[int], status: Status = ...) -> Sequence[Any]: ...


@dataclass
class TurnScores:
    """Per sampled token: its log-probability and the entropy of the distribution it was
    drawn from, both at the sampling temperature, under the weights that sampled it."""

    logprobs: list[float] = field(default_factory=list)
    entropy: list[float] = field(default_factory=list)


@runtime_checkable
class ScoringEngine(Protocol):
    """A rollout engine that reports the :class:`TurnScores` of its last ``generate``
    call, one per context (empty where it sampled nothing or sampled greedily)."""

    def sampled_scores(self) -> list[TurnScores]: ...


@dataclass
class Episode:
    """One finished episode: its transcript and how it ended. ``sampled`` holds the
    engine's :class:`TurnScores` of every generated token, in order, or None once a turn
    came without them (an engine that reports none, a greedy turn)."""

    slot: int
    task_id: str
    group: str
    sample_id: str
    transcript: Transcript
    reward: float = 0.0
    status: str = Status.RUNNING.value
    success: bool = False
    score: float = 0.0
    turns: int = 0
    info: dict[str, Any] = field(default_factory=dict)
    sampled: TurnScores | None = field(default_factory=TurnScores)

    @property
    def generated_tokens(self) -> int:
        return self.transcript.generated_tokens

    def add_turn(self, ids: Sequence[int], scores: TurnScores | None) -> None:
        """Append a sampled turn to the transcript, and its scores (None: not reported)."""
        self.transcript.add_generated(ids)
        if self.sampled is None or scores is None or len(scores.logprobs) != len(ids):
            self.sampled = None
            return
        self.sampled.logprobs.extend(scores.logprobs)
        self.sampled.entropy.extend(scores.entropy)

    def behaviour_scores(self) -> TurnScores | None:
        """The sampling engine's scores of every loss token, or None when some are missing.

        >>> from agentgym_eppo.trainer.rollout.chat import Transcript
        >>> episode = Episode(0, "os", "g", "s", Transcript([1, 2]))
        >>> episode.add_turn([7, 8], TurnScores([-0.1, -0.2], [0.5, 0.4]))
        >>> episode.behaviour_scores().logprobs
        [-0.1, -0.2]
        >>> episode.add_turn([9], None)
        >>> episode.behaviour_scores() is None
        True
        """
        if self.sampled is None or len(self.sampled.logprobs) != self.generated_tokens:
            return None
        return self.sampled


@dataclass(frozen=True)
class RolloutLimits:
    """Per-episode token limits (EPPO paper, appendix A.2: 1,024 per turn, 8,192 in all)."""

    max_tokens_per_turn: int = d.MAX_TOKENS_PER_TURN
    max_context: int = d.MAX_CONTEXT
    temperature: float = d.TEMPERATURE


def slot_info(infos: Mapping[str, Any], index: int) -> dict[str, Any]:
    """Slot ``index``'s plain info out of a Gymnasium dict-of-arrays info (``reset``)."""
    return {
        key: values[index]
        for key, values in infos.items()
        if not key.startswith("_") and (f"_{key}" not in infos or infos[f"_{key}"][index])
    }


def start_episode(
    tokenizer: PreTrainedTokenizerBase,
    slot: int,
    observation: str,
    info: Mapping[str, Any],
    prompt_style: str = "full",
) -> Episode:
    """An :class:`Episode` whose transcript holds the prompt built from a reset's info."""
    tokens = prompt_token_ids(
        tokenizer,
        info["system_prompt"],
        observation,
        info.get("tools"),
        style=prompt_style,
        task_id=str(info["task_id"]),
    )
    return Episode(
        slot=slot,
        task_id=str(info["task_id"]),
        group=str(info.get("group", f"{info['task_id']}:{info['sample_id']}")),
        sample_id=str(info["sample_id"]),
        transcript=Transcript(tokens),
    )


def play_episodes(
    env: SlotEnv,
    episodes: Sequence[Episode],
    engine: RolloutEngine,
    tokenizer: PreTrainedTokenizerBase,
    limits: RolloutLimits,
) -> list[Episode]:
    """Play every episode (already reset, one per slot) to its end; return them."""
    eos = int(tokenizer.eos_token_id)
    by_slot = {episode.slot: episode for episode in episodes}
    running = [episode.slot for episode in episodes]
    for slot in list(running):
        if len(by_slot[slot].transcript) >= limits.max_context:
            _finish(by_slot[slot], env.abort_some([slot], Status.AGENT_CONTEXT_LIMIT)[0])
            running.remove(slot)
    while running:
        budgets = [
            min(limits.max_tokens_per_turn, limits.max_context - len(by_slot[s].transcript))
            for s in running
        ]
        turns = engine.generate(
            [by_slot[s].transcript.tokens for s in running], budgets, limits.temperature
        )
        reported = engine.sampled_scores() if isinstance(engine, ScoringEngine) else None
        actions: list[str] = []
        for k, (slot, ids) in enumerate(zip(running, turns, strict=True)):
            by_slot[slot].add_turn(ids, reported[k] if reported is not None else None)
            transcript = by_slot[slot].transcript
            if not ids or ids[-1] != eos:
                transcript.add_template([eos])  # the turn was cut: close it as the template does
            body = ids[:-1] if ids and ids[-1] == eos else ids
            actions.append(str(tokenizer.decode(body, skip_special_tokens=False)))
        still_running: list[int] = []
        overflow: list[int] = []
        for outcome in env.step_some(running, actions):
            episode = by_slot[outcome.index]
            episode.turns += 1
            if outcome.terminated or outcome.truncated:
                _finish(episode, outcome)
                continue
            reply = observation_token_ids(tokenizer, outcome.observation)
            # The next turn needs room for at least one token after the reply.
            if len(episode.transcript) + len(reply) + 1 > limits.max_context:
                overflow.append(outcome.index)
                continue
            episode.transcript.add_template(reply)
            still_running.append(outcome.index)
        if overflow:
            for outcome in env.abort_some(overflow, Status.AGENT_CONTEXT_LIMIT):
                _finish(by_slot[outcome.index], outcome)
        running = still_running
    return list(episodes)


def _finish(episode: Episode, outcome: Any) -> None:
    info = dict(outcome.info)
    episode.reward = float(outcome.reward)
    episode.status = str(info.get("status", Status.TASK_ERROR.value))
    episode.success = bool(info.get("success", False))
    episode.score = float(info.get("score", 0.0))
    episode.info = info


def episodes_by_task(episodes: Sequence[Episode]) -> dict[str, list[Episode]]:
    """The episodes of each task, tasks in sorted order, each task's in played order.

    >>> from agentgym_eppo.trainer.rollout.chat import Transcript
    >>> def played(task):
    ...     return Episode(0, task, "g", "s", Transcript([1], [1]))
    >>> {task: len(e) for task, e in episodes_by_task([played("os"), played("db"), played("os")]).items()}
    {'db': 1, 'os': 2}
    """
    by_task: dict[str, list[Episode]] = {}
    for episode in episodes:
        by_task.setdefault(episode.task_id, []).append(episode)
    return {task: by_task[task] for task in sorted(by_task)}


def group_rewards(episodes: Sequence[Episode]) -> dict[str, set[float]]:
    """Each GRPO group's distinct rewards. ``task_error`` episodes are left out, as the
    update leaves them out of the advantages: a group whose only difference is a task
    error carries no signal.

    >>> from agentgym_eppo.trainer.rollout.chat import Transcript
    >>> def played(group, reward, status="completed"):
    ...     return Episode(0, "os", group, "s", Transcript([1], [1]), reward=reward, status=status)
    >>> group_rewards([played("a", 1.0), played("a", 0.0), played("b", 0.0),
    ...                played("b", -0.2, "task_error")])
    {'a': {0.0, 1.0}, 'b': {0.0}}
    """
    rewards: dict[str, set[float]] = {}
    for episode in episodes:
        if episode.status != Status.TASK_ERROR.value:
            rewards.setdefault(episode.group, set()).add(episode.reward)
    return rewards


def mixed_groups(episodes: Sequence[Episode]) -> list[Episode]:
    """The episodes of the groups whose rewards differ (:func:`group_rewards`): the only
    ones a group-relative advantage gives anything but zero; what DAPO's dynamic
    sampling keeps."""
    mixed = {group for group, rewards in group_rewards(episodes).items() if len(rewards) > 1}
    return [episode for episode in episodes if episode.group in mixed]
