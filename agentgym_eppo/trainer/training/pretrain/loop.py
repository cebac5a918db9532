"""Pretraining the shipped base model: expert trajectories of fresh task instances.

``agentgym-eppo pretrain --config configs/tiny-base.yaml`` runs three stages in one
run folder, each resumable:

1. **Data.** For every task family, fresh instances from its generator with new seeds
   (:func:`agentgym_eppo.environments.fresh.fresh_tasks`: every dev and test instance
   is dropped by content hash) or, where a config says ``source: train``, the shipped
   train split; the environment's expert plays each one and the solved episodes are
   written as shards (``data/<task>-<k>.jsonl.gz``, atomically; a finished shard is
   never redone). Shards are played by ``data.workers`` spawned processes.
2. **Tokenizer and model.** A byte-level BPE tokenizer trained on the episodes' text and
   a Qwen2 causal LM (:mod:`.models`).
3. **Training.** Next-token cross-entropy on the agent's turns of the episodes, in the
   exact token layout of the rollouts (:func:`.sft.expert_transcript`, the config's
   prompt style). Each optimizer step takes ``train.batch_tokens`` tokens of episodes
   from a seeded shuffle of the whole set (epochs follow each other); inside a step the
   episodes are sorted by length into micro-batches of ``train.micro_batch_tokens``, so
   padding stays a few percent. AdamW with linear warm-up and cosine decay.
   Checkpoints every ``train.save_every`` steps hold the model, the optimizer and the
   step; the step plan depends only on the data and the seed, so a run killed at any
   point resumes to the same weights.

The result, ``RUN_DIR/model``, is a ``save_pretrained`` folder (safetensors, config,
tokenizer with its chat template, generation config) plus ``pretrain.json`` (what it
was trained on, for how long, how fast).
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import os
import random
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
import yaml
from transformers import PreTrainedModel

from agentgym_eppo.registration import TASK_IDS

from ..checkpoint import latest_checkpoint, policy_card, save_checkpoint
from ..config import _build, read_config_values
from ..config_fields import help_field as _help
from ..devices import autocast_context, check_bf16, resolve_bf16
from ..rollout.chat import PROMPT_STYLES, Transcript, action_text
from .batching import build_micro_batch, plan_micro_batches
from .models import architecture, build_tiny_model, build_tokenizer, load_policy, resolve_model_path
from .sft import ExpertEpisode, corpus, expert_transcript, sft_lr_factor

TASKS = TASK_IDS


SOURCES = ("fresh", "train")

HASTY_ANSWERS: dict[str, dict[str, Any]] = {
    "os": {"name": "answer_action", "arguments": {"answer": ""}},
    "db": {"name": "commit_final_answer", "arguments": {"answers": []}},
    "kg": {"name": "final_answer", "arguments": {"variable": "#0"}},
}
"""The hasty demonstrator's one call per task: the task's answer tool at the first turn,
before any tool has shown it anything (``data.hasty``). A policy that has imitated it
sometimes answers blind; RL can learn not to, and that lesson holds on every instance."""


@dataclass
class PretrainData:
    """What the model is trained on: expert episodes of each task family."""

    episodes: dict[str, int] = field(
        default_factory=dict,
        metadata={"help": "Expert episodes per task family (task ids as info['task_id'])."},
    )
    source: dict[str, str] = field(
        default_factory=dict,
        metadata={
            "help": "Per task: 'fresh' (new instances from the generator, dev/test held out by "
            "content hash; the default) or 'train' (the shipped train split, cycled)."
        },
    )
    repeat: dict[str, int] = field(
        default_factory=dict,
        metadata={
            "help": "Per task, how many times each of its episodes appears in an epoch (default 1): "
            "the mixture's weights, for tasks whose episodes are few or short."
        },
    )
    seed: int = _help("Seed of the fresh instances (each shard adds its index).", 1)
    shard_size: int = _help("Episodes per data shard (the unit of resuming and of work).", 500)
    workers: int = _help("Processes that play the experts.", 2)
    env_kwargs: dict[str, dict[str, Any]] = field(
        default_factory=dict,
        metadata={
            "help": "Per task, keyword arguments of its environment (e.g. {os: {command_timeout: 5}})."
        },
    )
    hasty: dict[str, float] = field(
        default_factory=dict,
        metadata={
            "help": "Per task, the share of its instances played by the hasty demonstrator "
            "(HASTY_ANSWERS: it answers at its first turn without using a tool) and kept "
            "whatever their outcome: imperfect demonstrations, a failure that recurs across "
            "instances. Default none (expert episodes only)."
        },
    )


@dataclass
class PretrainModel:
    """The Qwen2 model and the tokenizer built for it."""

    vocab_size: int = _help("BPE vocabulary size (bytes, merges and added tokens).", 4096)
    tokenizer_episodes: int = _help("Episodes per task whose text trains the tokenizer.", 2000)
    hidden_size: int = _help("Model width.", 192)
    layers: int = _help("Transformer layers.", 6)
    heads: int = _help("Attention heads.", 4)
    kv_heads: int = _help("Key/value heads (grouped-query attention, as Qwen2).", 2)
    intermediate_size: int = _help("MLP width (SwiGLU).", 576)
    max_position_embeddings: int = _help("Longest context (rollout context + one turn).", 3168)


@dataclass
class PretrainTrain:
    """The optimisation."""

    steps: int = _help("Optimizer steps.", 400)
    batch_tokens: int = _help("Tokens (padding included) per optimizer step.", 32768)
    micro_batch_tokens: int = _help("Tokens per forward/backward pass.", 8192)
    max_length: int = _help("Episodes longer than this (tokens) are left out.", 3072)
    lr: float = _help("Peak learning rate (AdamW).", 1.5e-3)
    warmup_fraction: float = _help("Share of the steps with a linear warm-up.", 0.03)
    final_lr_fraction: float = _help("The cosine ends at this share of the peak rate.", 0.1)
    weight_decay: float = _help("AdamW weight decay.", 0.01)
    save_every: int = _help("Steps between resumable checkpoints.", 25)
    snapshots: list[int] = field(
        default_factory=list,
        metadata={
            "help": "Steps whose weights are also kept as model folders (the learning curve)."
        },
    )


@dataclass
class PretrainConfig:
    """``agentgym-eppo pretrain`` (see configs/tiny-base.yaml)."""

    seed: int = _help("Seeds the model's initialisation and the order of the data.", 0)
    output_dir: str = _help(
        "Run folder: data shards, checkpoints, the model, metrics.", "runs/tiny-base"
    )
    threads: int = _help("torch threads (the machine's cores when it is otherwise idle).", 2)
    prompt: str = _help(
        "Prompt style of the episodes (the rollouts' rollout.prompt): 'compact' or 'full'.",
        "compact",
    )
    progress: bool = _help("Show a live progress bar.", True)
    init_from: str | None = _help(
        "Continue pretraining a saved model (a folder or a shipped name such as "
        "agentgym-tiny): its weights and tokenizer start the run and the model section is "
        "not used; none (default) builds a new tokenizer and model from the data.",
        None,
    )
    bf16: bool | str = _help(
        "bf16 autocast for the matmuls, fp32 master weights: auto (a GPU, or a CPU with "
        "avx512_bf16/AMX) | true | false.",
        "auto",
    )
    data: PretrainData = field(default_factory=PretrainData)
    model: PretrainModel = field(default_factory=PretrainModel)
    train: PretrainTrain = field(default_factory=PretrainTrain)

    def __post_init__(self) -> None:
        unknown = sorted(set(self.data.episodes) - set(TASKS))
        if unknown or not self.data.episodes:
            raise ValueError(
                f"data.episodes must name task families of {TASKS}; got {sorted(self.data.episodes)}"
            )
        for task, times in self.data.repeat.items():
            if task not in self.data.episodes or times < 1:
                raise ValueError(
                    f"data.repeat.{task}: {times!r} must be >= 1 for a task of data.episodes"
                )
        for task, source in self.data.source.items():
            if task not in self.data.episodes or source not in SOURCES:
                raise ValueError(
                    f"data.source.{task}: {source!r} (sources: {SOURCES}) for a task of data.episodes"
                )
        for task, share in self.data.hasty.items():
            if task not in HASTY_ANSWERS or task not in self.data.episodes or not 0 <= share < 1:
                raise ValueError(
                    f"data.hasty.{task}: {share!r} must be in [0, 1) for a task of data.episodes "
                    f"with a hasty answer ({sorted(HASTY_ANSWERS)})"
                )
        if self.prompt not in PROMPT_STYLES:
            raise ValueError(f"prompt must be one of {PROMPT_STYLES}, got {self.prompt!r}")
        check_bf16(self.bf16)
        t = self.train
        if t.micro_batch_tokens < t.max_length or t.batch_tokens < t.micro_batch_tokens:
            raise ValueError(
                "need train.max_length <= train.micro_batch_tokens <= train.batch_tokens"
            )
        if not (0 <= t.warmup_fraction < 1 and 0 <= t.final_lr_fraction <= 1):
            raise ValueError(
                "train.warmup_fraction must be in [0, 1), train.final_lr_fraction in [0, 1]"
            )
        if self.init_from is None and self.model.max_position_embeddings < t.max_length:
            raise ValueError("model.max_position_embeddings must cover train.max_length")
        if min([self.data.shard_size, self.data.workers, t.steps, t.save_every]) < 1:
            raise ValueError(
                "data.shard_size, data.workers, train.steps, train.save_every must be >= 1"
            )


def load_pretrain_config(path: str | Path | None, overrides: Sequence[str] = ()) -> PretrainConfig:
    """Read a YAML config, apply ``key=value`` overrides, validate."""
    config: PretrainConfig = _build(PretrainConfig, read_config_values(path, overrides), "")
    return config


# ---------------------------------------------------------------------------- data


@dataclass(frozen=True)
class Shard:
    task_id: str
    index: int
    count: int
    first: int  # the task's episodes before this shard (where a 'train' source starts)
    source: str
    seed: int
    env_kwargs: Mapping[str, Any]
    hasty: float = 0.0

    @property
    def name(self) -> str:
        return f"{self.task_id}-{self.index:04d}.jsonl.gz"


def plan_shards(data: PretrainData) -> list[Shard]:
    """The shards of ``data``, tasks interleaved so that workers finish together."""
    per_task = []
    for task_id, total in data.episodes.items():
        source = data.source.get(task_id, "fresh")
        kwargs = data.env_kwargs.get(task_id, {})
        count = -(-total // data.shard_size)
        per_task.append(
            [
                Shard(
                    task_id,
                    k,
                    min(data.shard_size, total - k * data.shard_size),
                    k * data.shard_size,
                    source,
                    data.seed * 1_000 + k,
                    kwargs,
                    data.hasty.get(task_id, 0.0),
                )
                for k in range(count)
            ]
        )
    shards = [s for row in _roundrobin(per_task) for s in row]
    return shards


def _roundrobin(lists: Sequence[Sequence[Shard]]) -> Iterator[list[Shard]]:
    for k in range(max(len(x) for x in lists)):
        yield [x[k] for x in lists if k < len(x)]


def play_shard(shard: Shard) -> list[dict[str, Any]]:
    """One shard's episodes (as JSON-ready dicts): the expert's solved ones, and every
    episode of the instances that a draw seeded by the shard gave the hasty demonstrator."""
    import gymnasium as gym

    import agentgym_eppo  # noqa: F401  (registers the environments)
    from agentgym_eppo.environments.fresh import content_hash, fresh_tasks
    from agentgym_eppo.registration import env_id_for

    torch.set_num_threads(1)
    env_id = env_id_for(shard.task_id)
    if shard.source == "fresh":
        rows = fresh_tasks(shard.task_id, shard.count, shard.seed)
        env = gym.make(env_id, tasks=rows, **shard.env_kwargs)
        hashes = [content_hash(shard.task_id, row) for row in rows]
        indices = list(range(len(rows)))
    else:
        env = gym.make(env_id, split="train", **shard.env_kwargs)
        size = len(env.unwrapped.task_set)  # type: ignore[attr-defined]
        indices = [(shard.first + k) % size for k in range(shard.count)]
        hashes = [""] * len(indices)
    episodes = []
    draw = random.Random(shard.seed)
    try:
        for index, digest in zip(indices, hashes, strict=True):
            if draw.random() < shard.hasty:
                episode = play_hasty(env, index, HASTY_ANSWERS[shard.task_id])
            else:
                episode = play_expert(env, index)
            if episode.success or episode.demonstrator == "hasty":
                episodes.append({**dataclasses.asdict(episode), "content_hash": digest})
    finally:
        env.close()
    return episodes


def play_expert(env: Any, index: int) -> ExpertEpisode:
    """The expert's episode of instance ``index`` of ``env`` (solved or not)."""
    return _play(env, index, lambda: action_text(env.unwrapped.expert_action()), "expert")


def play_hasty(env: Any, index: int, answer: Mapping[str, Any]) -> ExpertEpisode:
    """The hasty demonstrator's episode of instance ``index``: ``answer`` at the first
    turn, which ends it (every entry of ``HASTY_ANSWERS`` is its task's answer call)."""
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


def build_data(
    config: PretrainConfig, run_dir: Path, on_shard: Callable[[Shard, int], None] | None = None
) -> list[Path]:
    """Play every shard not yet on disk; return every shard's path (in plan order)."""
    folder = run_dir / "data"
    folder.mkdir(parents=True, exist_ok=True)
    shards = plan_shards(config.data)
    missing = [s for s in shards if not (folder / s.name).exists()]
    if missing:
        with ProcessPoolExecutor(config.data.workers, mp_context=get_context("spawn")) as pool:
            for shard, rows in zip(missing, pool.map(play_shard, missing), strict=True):
                staging = folder / (shard.name + ".tmp")
                with gzip.open(staging, "wt", encoding="utf-8") as handle:
                    for row in rows:
                        handle.write(json.dumps(row, ensure_ascii=False) + "\n")
                os.replace(staging, folder / shard.name)
                if on_shard is not None:
                    on_shard(shard, len(rows))
    return [folder / s.name for s in shards]


def load_episodes(paths: Sequence[Path]) -> list[ExpertEpisode]:
    """The episodes of ``paths``; a fresh instance that two shards drew is kept once."""
    episodes: list[ExpertEpisode] = []
    seen: set[str] = set()
    names = {f.name for f in dataclasses.fields(ExpertEpisode)}
    for path in paths:
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            for line in handle:
                row = json.loads(line)
                digest = row.get("content_hash", "")
                if digest:
                    if digest in seen:
                        continue
                    seen.add(digest)
                episodes.append(ExpertEpisode(**{k: v for k, v in row.items() if k in names}))
    return episodes


# ------------------------------------------------------------------------ training


def plan_steps(lengths: Sequence[int], steps: int, batch_tokens: int, seed: int) -> list[list[int]]:
    """``steps`` batches of episode indices of about ``batch_tokens`` tokens each, taken in
    order from seeded shuffles of all episodes (a new shuffle each epoch)."""
    plan: list[list[int]] = []
    epoch = 0
    order: list[int] = []
    position = 0
    while len(plan) < steps:
        batch: list[int] = []
        tokens = 0
        while tokens < batch_tokens:
            if position == len(order):
                order = list(range(len(lengths)))
                random.Random(f"{seed}-epoch-{epoch}").shuffle(order)
                epoch += 1
                position = 0
            index = order[position]
            position += 1
            batch.append(index)
            tokens += lengths[index]
        plan.append(batch)
    return plan


def step_loss(
    model: PreTrainedModel,
    transcripts: Sequence[Transcript],
    batch: Sequence[int],
    micro_batch_tokens: int,
    pad_token_id: int,
    bf16: bool = False,
) -> tuple[float, int, int]:
    """Forward and backward over one step's episodes (``bf16``: under bf16 autocast, the
    loss in fp32); the loss is the token mean over the step's target tokens. Returns
    (loss, tokens incl. padding, target tokens)."""
    targets = sum(transcripts[i].generated_tokens for i in batch)
    total, padded = 0.0, 0
    weight = model.get_output_embeddings().weight
    for group in plan_micro_batches([len(transcripts[i]) for i in batch], micro_batch_tokens):
        micro = build_micro_batch(transcripts, [batch[k] for k in group], pad_token_id)
        padded += micro.input_ids.numel()
        with autocast_context(bf16):
            hidden = model.get_decoder()(
                input_ids=micro.input_ids, attention_mask=micro.attention_mask, use_cache=False
            ).last_hidden_state
            logits = hidden[micro.rows, micro.positions] @ weight.t()
        loss = F.cross_entropy(logits.float(), micro.targets, reduction="sum") / targets
        loss.backward()
        total += float(loss.detach())
    return total, padded, targets


def pretrain(config: PretrainConfig, console: Any = None) -> Path:
    """Run (or resume) the pretraining of ``config``; return the model folder."""
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )
    from transformers import logging as transformers_logging

    transformers_logging.disable_progress_bar()
    console = console or Console()
    run_dir = Path(config.output_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.yaml").write_text(
        yaml.safe_dump(dataclasses.asdict(config), sort_keys=False), encoding="utf-8"
    )
    torch.set_num_threads(config.threads)
    bf16 = resolve_bf16(config.bf16)
    started = time.perf_counter()
    timings: dict[str, float] = _read_json(run_dir / "timings.json")

    def progress() -> Progress:
        return Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=console,
            disable=not config.progress,
        )

    shards = plan_shards(config.data)
    t0 = time.perf_counter()
    with progress() as bar:
        job = bar.add_task("data: expert episodes", total=len(shards))
        bar.update(job, completed=sum((run_dir / "data" / s.name).exists() for s in shards))
        paths = build_data(config, run_dir, lambda s, n: bar.advance(job))
    timings["data_s"] = timings.get("data_s", 0.0) + time.perf_counter() - t0
    episodes = load_episodes(paths)
    counts = {t: sum(e.task_id == t for e in episodes) for t in config.data.episodes}
    hasty = {t: sum(e.task_id == t and e.demonstrator == "hasty" for e in episodes) for t in counts}
    console.print(
        f"data: {len(episodes)} episodes {counts} ({sum(hasty.values())} of them hasty {hasty})"
    )

    resume = latest_checkpoint(run_dir / "checkpoints")
    if resume is not None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(resume.directory)
        model: PreTrainedModel = AutoModelForCausalLM.from_pretrained(
            resume.directory, dtype=torch.float32
        )
        console.print(f"resuming after step {resume.state['step']}")
    elif config.init_from is not None:
        model, tokenizer = load_policy(config.init_from)
        if model.config.max_position_embeddings < config.train.max_length:
            raise ValueError(
                f"init_from {config.init_from}: its context ({model.config.max_position_embeddings}"
                f" positions) is shorter than train.max_length ({config.train.max_length})"
            )
        console.print(f"continuing the pretraining of {config.init_from}")
    else:
        by_task: dict[str, list[ExpertEpisode]] = {}
        for episode in episodes:
            by_task.setdefault(episode.task_id, []).append(episode)
        sample = [e for rows in by_task.values() for e in rows[: config.model.tokenizer_episodes]]
        tokenizer = build_tokenizer(list(corpus(sample)), vocab_size=config.model.vocab_size)
        model = build_tiny_model(tokenizer, seed=config.seed, **architecture(config.model))
    t0 = time.perf_counter()
    transcripts = [expert_transcript(tokenizer, e, config.prompt) for e in episodes]
    kept = [k for k, t in enumerate(transcripts) if len(t) <= config.train.max_length]
    transcripts = [transcripts[k] for k in kept]
    task_of = [episodes[k].task_id for k in kept]
    console.print(
        f"tokenized {len(transcripts)} episodes in {time.perf_counter() - t0:.0f}s "
        f"({len(episodes) - len(kept)} longer than {config.train.max_length} tokens left out); "
        f"{sum(map(len, transcripts)) / 1e6:.2f}M tokens, "
        f"{sum(t.generated_tokens for t in transcripts) / 1e6:.2f}M target tokens"
    )
    t = config.train
    # An episode repeated r times in an epoch appears r times in the shuffle.
    epoch = [k for k, task in enumerate(task_of) for _ in range(config.data.repeat.get(task, 1))]
    lengths = [len(transcripts[k]) for k in epoch]
    plan = [
        [epoch[i] for i in batch]
        for batch in plan_steps(lengths, t.steps, t.batch_tokens, config.seed)
    ]
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=t.lr, betas=(0.9, 0.95), weight_decay=t.weight_decay
    )
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda k: sft_lr_factor(k, t.steps, t.warmup_fraction, t.final_lr_fraction)
    )
    first = 0
    if resume is not None:
        optimizer.load_state_dict(resume.state["optimizer"])
        scheduler.load_state_dict(resume.state["scheduler"])
        first = int(resume.state["step"])
    params = sum(p.numel() for p in model.parameters())
    console.print(
        f"model: Qwen2, {params / 1e6:.2f}M parameters, vocabulary {len(tokenizer)}, "
        f"{'bf16 autocast' if bf16 else 'fp32'}"
    )
    card = policy_card(config.prompt)  # eval and RL read the prompt style from it
    metrics = (run_dir / "metrics.jsonl").open("a", encoding="utf-8")
    model.train()
    train_started = time.perf_counter()
    seen = sum(len(transcripts[i]) for batch in plan[:first] for i in batch)
    with progress() as bar:
        job = bar.add_task("pretrain", total=t.steps, completed=first)
        for step in range(first, t.steps):
            t1 = time.perf_counter()
            loss, padded, targets = step_loss(
                model, transcripts, plan[step], t.micro_batch_tokens, tokenizer.pad_token_id, bf16
            )
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            seconds = time.perf_counter() - t1
            tokens = sum(len(transcripts[i]) for i in plan[step])
            seen += tokens
            record = {
                "step": step + 1,
                "loss": loss,
                "lr": scheduler.get_last_lr()[0],
                "tokens": tokens,
                "padded_tokens": padded,
                "target_tokens": targets,
                "tokens_seen": seen,
                "seconds": seconds,
                "tokens_per_s": tokens / seconds,
                "tasks": {k: sum(task_of[i] == k for i in plan[step]) for k in counts},
            }
            metrics.write(json.dumps(record) + "\n")
            metrics.flush()
            bar.update(
                job,
                advance=1,
                description=f"pretrain loss {loss:.3f} {tokens / seconds:,.0f} tok/s",
            )
            done = step + 1
            if done % t.save_every == 0 or done == t.steps:
                state = {
                    "step": done,
                    "optimizer": optimizer.state_dict(),
                    "scheduler": scheduler.state_dict(),
                }
                save_checkpoint(
                    run_dir / "checkpoints" / f"step_{done}",
                    model,
                    tokenizer,
                    state,
                    keep=1,
                    card=card,
                )
                timings["train_s"] = (
                    timings.get("train_s", 0.0) + time.perf_counter() - train_started
                )
                train_started = time.perf_counter()
                _write_json(run_dir / "timings.json", timings)
            if done in t.snapshots:
                save_checkpoint(run_dir / "snapshots" / f"step_{done}", model, tokenizer, card=card)
    metrics.close()
    out = run_dir / "model"
    _set_generation_defaults(model, tokenizer)
    save_checkpoint(out, model, tokenizer, card=card)
    earlier = (
        _read_json(Path(resolve_model_path(config.init_from), "pretrain.json"))
        if config.init_from
        else {}
    )
    summary = {
        "parameters": params,
        "vocabulary": len(tokenizer),
        "episodes": counts,
        "hasty_episodes": hasty,
        "tokens_per_epoch": sum(map(len, transcripts)),
        "tokens_seen": seen,
        # a continued run: what the model had seen before it (its own pretrain.json)
        "tokens_seen_total": seen
        + int(earlier.get("tokens_seen_total", earlier.get("tokens_seen", 0))),
        "init_from": config.init_from,
        "steps": t.steps,
        "prompt": config.prompt,
        "precision": "bf16 autocast" if bf16 else "fp32",
        "data_seconds": round(timings.get("data_s", 0.0), 1),
        "train_seconds": round(timings.get("train_s", 0.0), 1),
        "wall_seconds_this_sitting": round(time.perf_counter() - started, 1),
        "config": dataclasses.asdict(config),
    }
    _write_json(out / "pretrain.json", summary)
    console.print(
        f"pretrained: {out} ({seen / 1e6:.1f}M tokens seen, data {summary['data_seconds']:.0f}s, "
        f"training {summary['train_seconds']:.0f}s)"
    )
    return out


def _set_generation_defaults(model: PreTrainedModel, tokenizer: Any) -> None:
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id


def _read_json(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


def _write_json(path: Path, data: Mapping[str, Any]) -> None:
    staging = path.with_name(path.name + ".tmp")
    staging.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(staging, path)
