"""SFT warm start: record expert trajectories, then fit the policy on the expert's turns.

Every environment ships an expert (``env.unwrapped.expert_action()``), reached here
through the vector env's ``call_some``. A tiny model trained from scratch cannot emit a
well-formed tool call, so RL would see nothing but aborts; a few epochs on the
expert's turns teach the format (and some of the tasks) first. The expert's episodes
also provide the text the tokenizer is trained on.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from agentgym_eppo.trainer.algorithms.defaults import MAX_GRAD_NORM
from agentgym_eppo.trainer.rollout.chat import (
    Transcript,
    action_text,
    action_token_ids,
    compact_system_prompt,
    observation_token_ids,
    prompt_token_ids,
)
from agentgym_eppo.trainer.rollout.episodes import slot_info

from .batching import build_micro_batch, plan_micro_batches, token_logprobs
from .checkpoint import rng_state, set_rng_state


@dataclass
class ExpertEpisode:
    """An expert's episode as text (tokenizer-independent)."""

    task_id: str
    sample_id: str
    system_prompt: str
    tools: list[dict[str, Any]]
    task_text: str
    actions: list[str] = field(default_factory=list)
    observations: list[str] = field(default_factory=list)  # the reply after each action
    reward: float = 0.0
    success: bool = False
    demonstrator: str = "expert"  # who played it: "expert", or "hasty" (pretraining's mixture)


def record_expert_episodes(
    venv: Any, episodes_per_task: int | Mapping[str, int], seed: int = 0
) -> list[ExpertEpisode]:
    """Play the expert in every slot of ``venv`` until each task has ``episodes_per_task``
    successful episodes (instances follow the vector env's sampler; failures are dropped).
    A mapping gives each ``info["task_id"]`` its own count (every task of ``venv`` needs one).

    Raises ``RuntimeError`` when a task's expert fails every episode of a round: an
    expert that cannot solve its task is a bug in that environment, or a turn limit
    shorter than the expert's episodes.
    """
    tasks = set(venv.task_ids)
    if isinstance(episodes_per_task, Mapping):
        if set(episodes_per_task) != tasks:
            raise ValueError(
                f"expert episode counts are for tasks {sorted(episodes_per_task)}, "
                f"the vector env runs {sorted(tasks)}"
            )
        wanted = dict(episodes_per_task)
    else:
        wanted = dict.fromkeys(tasks, episodes_per_task)
    kept: list[ExpertEpisode] = []
    observations, infos = venv.reset(seed=seed)
    starts = [(i, observations[i], slot_info(infos, i)) for i in range(venv.num_envs)]
    while starts:
        current = {index: _begin(obs, info) for index, obs, info in starts}
        running = list(current)
        while running:
            actions = [action_text(a) for a in venv.call_some(running, "expert_action")]
            still = []
            for outcome, action in zip(venv.step_some(running, actions), actions, strict=True):
                episode = current[outcome.index]
                episode.actions.append(action)
                episode.observations.append(outcome.observation)
                if outcome.terminated or outcome.truncated:
                    episode.reward = float(outcome.reward)
                    episode.success = bool(outcome.info.get("success", False))
                else:
                    still.append(outcome.index)
            running = still
        solved = {task: 0 for task in wanted}
        for episode in current.values():
            if episode.success and wanted[episode.task_id] > 0:
                wanted[episode.task_id] -= 1
                solved[episode.task_id] += 1
                kept.append(episode)
        failing = [t for t, n in solved.items() if n == 0 and wanted[t] > 0]
        if failing:
            raise RuntimeError(
                f"the expert of task(s) {failing} solved none of its episodes (is the turn "
                f"limit, e.g. rollout.max_turns, shorter than the expert needs?)"
            )
        # Only the slots of tasks still short of episodes play again: a task whose
        # quota is met (ALFWorld's 40 long episodes beside OS's 300 short ones) would
        # otherwise keep playing, and paying for, episodes that are thrown away.
        short = [i for i, task_id in enumerate(venv.task_ids) if wanted[task_id] > 0]
        starts = venv.reset_some(short) if short else []
    return kept


def split_held_out(
    episodes: Sequence[ExpertEpisode], per_task: int
) -> tuple[list[ExpertEpisode], list[ExpertEpisode]]:
    """``(train, held_out)``: per task, the last ``per_task`` distinct instances recorded
    are held out, and no episode of a held-out instance is trained on.

    >>> e = [ExpertEpisode("os", f"os-{i % 3}", "", [], "") for i in range(5)]
    >>> train, held = split_held_out(e, 1)
    >>> [x.sample_id for x in train], [x.sample_id for x in held]
    (['os-0', 'os-2', 'os-0'], ['os-1'])
    """
    held: dict[str, list[str]] = {}
    for episode in reversed(episodes):
        ids = held.setdefault(episode.task_id, [])
        if len(ids) < per_task and episode.sample_id not in ids:
            ids.append(episode.sample_id)
    chosen: set[tuple[str, str]] = set()
    held_out: list[ExpertEpisode] = []
    for episode in episodes:
        key = (episode.task_id, episode.sample_id)
        if episode.sample_id in held[episode.task_id] and key not in chosen:
            chosen.add(key)
            held_out.append(episode)
    train = [e for e in episodes if e.sample_id not in held.get(e.task_id, ())]
    return train, held_out


def _begin(observation: str, info: Mapping[str, Any]) -> ExpertEpisode:
    return ExpertEpisode(
        task_id=str(info["task_id"]),
        sample_id=str(info["sample_id"]),
        system_prompt=str(info["system_prompt"]),
        tools=list(info.get("tools") or []),
        task_text=observation,
    )


def corpus(episodes: Iterable[ExpertEpisode]) -> Iterator[str]:
    """The texts a tokenizer for these tasks should be trained on."""
    for episode in episodes:
        yield episode.system_prompt
        yield compact_system_prompt(episode.task_id, episode.tools)
        yield "\n".join(json.dumps(tool, ensure_ascii=False) for tool in episode.tools)
        yield episode.task_text
        yield from episode.actions
        yield from episode.observations


def expert_transcript(
    tokenizer: PreTrainedTokenizerBase, episode: ExpertEpisode, prompt_style: str = "full"
) -> Transcript:
    """The expert's episode in the rollout's token layout; the expert's turns are the loss.
    As in a rollout, no environment text (task, replies, call arguments) becomes a control
    token."""
    transcript = Transcript(
        prompt_token_ids(
            tokenizer,
            episode.system_prompt,
            episode.task_text,
            episode.tools,
            style=prompt_style,
            task_id=episode.task_id,
        )
    )
    for turn, action in enumerate(episode.actions):
        transcript.add_generated(action_token_ids(tokenizer, action))
        if turn + 1 < len(episode.actions):
            transcript.add_template(observation_token_ids(tokenizer, episode.observations[turn]))
    return transcript


def _token_mean(sums: Mapping[str, tuple[float, int]]) -> float:
    """Cross-entropy over every held-out loss token: long episodes weigh by their tokens."""
    return sum(nll for nll, _ in sums.values()) / max(1, sum(n for _, n in sums.values()))


def _task_mean(sums: Mapping[str, tuple[float, int]]) -> float:
    """The mean over tasks of each task's token-mean cross-entropy: every task weighs the
    same, whatever the length of its episodes."""
    return sum(nll / max(1, n) for nll, n in sums.values()) / max(1, len(sums))


HELD_OUT_AVERAGES = {"tokens": _token_mean, "tasks": _task_mean}
"""How :class:`EarlyStop` pools the held-out tasks' losses into the one it minimises."""


@dataclass
class EarlyStop:
    """Early stopping on held-out expert episodes (train-split instances the SFT never
    trains on): their loss is measured before the first step and every ``every``
    optimizer steps (and after the last); the weights of the lowest loss are the ones
    :func:`sft_train` leaves in the model. ``patience`` measurements in a row without a
    new lowest end the SFT early (0: never, the best weights are still kept).

    ``task_ids`` names each transcript's task (empty: one task), and ``average`` (a key
    of :data:`HELD_OUT_AVERAGES`) how the tasks' losses are pooled: ``"tokens"``, one
    token mean over all (an ALFWorld episode of 3,000 loss tokens outweighs twenty of
    OS's), or ``"tasks"``, the mean of the tasks' token means.

    ``curve`` records ``(optimizer step, pooled held-out loss)``, ``by_task`` each
    measurement's token-mean loss per task; ``best_step`` the step whose weights were
    kept (0: the weights the SFT started from).

    >>> stop = EarlyStop([Transcript([1, 2], [0, 1])] * 2, every=5, task_ids=["os", "kg"],
    ...                  average="tasks")
    >>> stop.pool({"os": (2.0, 10), "kg": (30.0, 100)}), stop.average
    (0.25, 'tasks')
    """

    transcripts: Sequence[Transcript]
    every: int
    patience: int = 0
    task_ids: Sequence[str] = ()
    average: str = "tokens"
    curve: list[tuple[int, float]] = field(default_factory=list)
    by_task: list[dict[str, float]] = field(default_factory=list)
    best_step: int = 0
    stopped_early: bool = False

    def __post_init__(self) -> None:
        if not self.transcripts or self.every < 1 or self.patience < 0:
            raise ValueError("EarlyStop needs held-out transcripts, every >= 1, patience >= 0")
        if self.task_ids and len(self.task_ids) != len(self.transcripts):
            raise ValueError("EarlyStop's task_ids must name the task of every transcript")
        if self.average not in HELD_OUT_AVERAGES:
            raise ValueError(f"EarlyStop's average must be one of {sorted(HELD_OUT_AVERAGES)}")

    def pool(self, sums: Mapping[str, tuple[float, int]]) -> float:
        """The loss the early stop minimises, from each task's (summed loss, tokens)."""
        return HELD_OUT_AVERAGES[self.average](sums)


def held_out_sums(
    model: PreTrainedModel,
    transcripts: Sequence[Transcript],
    micro_batch_tokens: int,
    pad_token_id: int,
    bf16: bool = False,
    task_ids: Sequence[str] = (),
) -> dict[str, tuple[float, int]]:
    """Per task (``task_ids``, aligned with ``transcripts``; empty: one task ``""``), the
    summed cross-entropy of ``model`` on the loss tokens of its transcripts, and their
    number."""
    names = list(task_ids) or [""] * len(transcripts)
    sums = dict.fromkeys(names, (0.0, 0))
    was_training = model.training
    model.eval()
    with torch.no_grad():
        for group in plan_micro_batches([len(t) for t in transcripts], micro_batch_tokens):
            micro = build_micro_batch(transcripts, list(group), pad_token_id)
            logprobs, _ = token_logprobs(model, micro, bf16=bf16)
            member = micro.member_of_token.to(logprobs.device)
            nll = torch.zeros(len(micro.members), device=logprobs.device)
            nll.index_add_(0, member, -logprobs.float())
            counts = torch.bincount(member, minlength=len(micro.members))
            for k, index in enumerate(micro.members):
                total, tokens = sums[names[index]]
                sums[names[index]] = (total + float(nll[k]), tokens + int(counts[k]))
    model.train(was_training)
    return sums


def sft_train(
    model: PreTrainedModel,
    transcripts: Sequence[Transcript],
    *,
    epochs: int,
    lr: float,
    batch_episodes: int,
    micro_batch_tokens: int,
    pad_token_id: int,
    seed: int = 0,
    bf16: bool = False,
    warmup_fraction: float = 0.0,
    final_lr_fraction: float = 1.0,
    on_step: Any = None,
    early_stop: EarlyStop | None = None,
    save_every: int = 0,
    on_save: Any = None,
    resume: Mapping[str, Any] | None = None,
) -> list[float]:
    """Token-mean cross-entropy on the loss tokens; one AdamW step per ``batch_episodes``.

    The learning rate rises linearly over the first ``warmup_fraction`` of the steps, then
    follows a cosine from ``lr`` down to ``final_lr_fraction * lr`` at the last step
    (``final_lr_fraction=1.0``: constant after warm-up). A model trained from scratch at a
    high rate needs the decay to settle: the last steps at a small rate lower the loss more
    than the same steps at the peak rate.

    Batches hold transcripts of similar length (sorted on a coarse length with random
    ties, then the batches shuffled, every epoch): mixing a 150-token DB episode with a
    1,500-token WebShop one would spend most of the step on padding.
    Returns the loss of every optimizer step. ``on_step(k, total, loss)`` reports progress.
    ``early_stop`` scores held-out episodes as it goes and leaves the best weights in the
    model (see :class:`EarlyStop`).

    Every ``save_every`` optimizer steps (but the last) ``on_save(state)`` receives the
    state that ``resume`` continues from, once ``model`` holds that step's weights again
    (the caller saves and loads them): the steps done, their losses, the optimizer, the
    schedule, the early stop's curves, misses and best weights, the RNG states, and the
    transcripts' lengths, which a resume with other transcripts fails on. The resumed SFT
    replays the order RNG's draws of the steps done and skips their batches, so it trains
    on the batches, and ends with the weights, of an SFT that was never stopped.
    """
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    order_rng = random.Random(seed)
    indices = list(range(len(transcripts)))
    steps_per_epoch = -(-len(indices) // batch_episodes)
    total = epochs * steps_per_epoch
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: sft_lr_factor(step, total, warmup_fraction, final_lr_fraction)
    )
    losses: list[float] = []
    best: dict[str, torch.Tensor] | None = None
    misses = 0
    lengths = [
        [len(t) for t in transcripts],
        [len(t) for t in early_stop.transcripts] if early_stop is not None else [],
    ]

    def measure(step: int) -> bool:
        """Score the held-out episodes at ``step``; False when patience has run out."""
        nonlocal best, misses
        assert early_stop is not None
        sums = held_out_sums(
            model,
            early_stop.transcripts,
            micro_batch_tokens,
            pad_token_id,
            bf16,
            early_stop.task_ids,
        )
        loss = early_stop.pool(sums)
        early_stop.curve.append((step, loss))
        early_stop.by_task.append({task: nll / max(1, n) for task, (nll, n) in sums.items()})
        if loss <= min(value for _, value in early_stop.curve):
            early_stop.best_step, misses = step, 0
            best = {k: v.detach().clone() for k, v in model.state_dict().items()}
            return True
        misses += 1
        return early_stop.patience == 0 or misses < early_stop.patience

    if resume is not None:
        if resume["lengths"] != lengths:
            raise ValueError(
                f"the SFT state to resume was saved for {len(resume['lengths'][0])} trained "
                f"and {len(resume['lengths'][1])} held-out transcripts of other lengths than "
                f"these {len(lengths[0])} and {len(lengths[1])} (not the episodes it trained "
                "on): refusing to resume"
            )
        optimizer.load_state_dict(resume["optimizer"])
        scheduler.load_state_dict(resume["scheduler"])
        losses = list(resume["losses"])
        if early_stop is not None:
            early_stop.curve, early_stop.best_step = list(resume["curve"]), resume["best_step"]
            early_stop.by_task = list(resume["by_task"])
            best, misses = resume["best"], resume["misses"]
        set_rng_state(resume["rng"])
    elif early_stop is not None:
        measure(0)
    model.train()
    for epoch in range(epochs):
        if early_stop is not None and early_stop.stopped_early:
            break
        ranked = sorted(indices, key=lambda i: (len(transcripts[i]) // 64, order_rng.random()))
        batches = [
            ranked[start : start + batch_episodes]
            for start in range(0, len(ranked), batch_episodes)
        ]
        order_rng.shuffle(batches)
        # every epoch has steps_per_epoch batches: those of the steps done are skipped
        for batch in batches[len(losses) - epoch * steps_per_epoch :]:
            tokens = sum(transcripts[i].generated_tokens for i in batch)
            step_loss = 0.0
            for group in plan_micro_batches(
                [len(transcripts[i]) for i in batch], micro_batch_tokens
            ):
                micro = build_micro_batch(transcripts, [batch[k] for k in group], pad_token_id)
                logprobs, _ = token_logprobs(model, micro, bf16=bf16)
                loss = -logprobs.sum() / tokens  # cross-entropy, token mean over the batch
                loss.backward()
                step_loss += float(loss.detach())
            torch.nn.utils.clip_grad_norm_(model.parameters(), MAX_GRAD_NORM)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            losses.append(step_loss)
            if on_step is not None:
                on_step(len(losses), total, step_loss)
            step = len(losses)
            due = early_stop is not None and (step % early_stop.every == 0 or step == total)
            if due and not measure(step):
                assert early_stop is not None
                early_stop.stopped_early = True
                break
            if save_every and step % save_every == 0 and step < total:
                on_save(
                    {
                        "step": step,
                        "losses": losses,
                        "optimizer": optimizer.state_dict(),
                        "scheduler": scheduler.state_dict(),
                        "curve": early_stop.curve if early_stop is not None else [],
                        "by_task": early_stop.by_task if early_stop is not None else [],
                        "best_step": early_stop.best_step if early_stop is not None else 0,
                        "best": best,
                        "misses": misses,
                        "rng": rng_state(),
                        "lengths": lengths,
                    }
                )
    if (
        best is not None
        and early_stop is not None
        and early_stop.curve[-1][0] != early_stop.best_step
    ):
        model.load_state_dict(best)
    return losses


def warmup_factor(step: int, warmup_steps: int) -> float:
    """The multiplier of a learning rate at step ``step`` (0-based) of a linear warm-up over
    ``warmup_steps`` steps: ``(step + 1) / warmup_steps``, then 1 (0 steps: always 1).
    The SFT's (:func:`sft_lr_factor`) and RL's (``rl.warmup_steps``) warm-ups.

    >>> [warmup_factor(k, 4) for k in range(6)], warmup_factor(0, 0)
    ([0.25, 0.5, 0.75, 1.0, 1.0, 1.0], 1.0)
    """
    return (step + 1) / warmup_steps if step < warmup_steps else 1.0


def sft_lr_factor(step: int, total: int, warmup_fraction: float, final_lr_fraction: float) -> float:
    """The multiplier of the SFT learning rate at optimizer step ``step`` (0-based) of
    ``total``: linear warm-up to 1, then a cosine down to ``final_lr_fraction``."""
    warmup = int(warmup_fraction * total)
    if step < warmup:
        return warmup_factor(step, warmup)
    span = max(1, total - 1 - warmup)
    progress = min(1.0, (step - warmup) / span)
    return final_lr_fraction + (1.0 - final_lr_fraction) * 0.5 * (
        1.0 + math.cos(math.pi * progress)
    )
