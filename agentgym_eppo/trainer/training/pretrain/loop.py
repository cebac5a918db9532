"""The pretraining run: data, then the tokenizer and model, then the training loop.

:func:`pretrain` builds (or finds) the data shards (:mod:`.data`), builds a tokenizer
and model from the episodes (or continues ``init_from``, or resumes a checkpoint), and
trains on the episodes' agent turns in the rollouts' token layout, checkpointing every
``train.save_every`` steps; the step plan (:func:`plan_steps`) depends only on the data
and the seed, so a run killed at any point resumes to the same weights.
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
import yaml
from transformers import PreTrainedModel

from ...algorithms.defaults import MAX_GRAD_NORM
from ...devices import autocast_context, resolve_bf16, resolve_device
from ...progress import live_bar, progress_bar
from ...rollout.chat import Transcript
from ..batching import build_micro_batch, plan_micro_batches
from ..checkpoint import latest_checkpoint, policy_card, save_checkpoint
from ..models import (
    architecture,
    build_tiny_model,
    build_tokenizer,
    load_policy,
    refuse_custom_code,
    resolve_model_path,
)
from ..sft import ExpertEpisode, corpus, expert_transcript, sft_lr_factor
from .config import PretrainConfig
from .data import build_data, load_episodes, plan_shards


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
    device = weight.device
    for group in plan_micro_batches([len(transcripts[i]) for i in batch], micro_batch_tokens):
        micro = build_micro_batch(transcripts, [batch[k] for k in group], pad_token_id)
        padded += micro.input_ids.numel()
        with autocast_context(bf16, device):
            hidden = model.get_decoder()(
                input_ids=micro.input_ids.to(device),
                attention_mask=micro.attention_mask.to(device),
                use_cache=False,
            ).last_hidden_state
            logits = hidden[micro.rows.to(device), micro.positions.to(device)] @ weight.t()
        loss = F.cross_entropy(logits.float(), micro.targets.to(device), reduction="sum") / targets
        loss.backward()
        total += float(loss.detach())
    return total, padded, targets


def pretrain(config: PretrainConfig, console: Any = None) -> Path:
    """Run (or resume) the pretraining of ``config``; return the model folder."""
    from rich.console import Console
    from transformers import logging as transformers_logging

    transformers_logging.disable_progress_bar()
    console = console or Console()
    live = live_bar(config.progress, console)
    run_dir = Path(config.output_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.yaml").write_text(
        yaml.safe_dump(dataclasses.asdict(config), sort_keys=False), encoding="utf-8"
    )
    torch.set_num_threads(config.threads)
    device = resolve_device(config.device)
    bf16 = resolve_bf16(config.bf16, device)
    started = time.perf_counter()
    timings: dict[str, float] = _read_json(run_dir / "timings.json")

    shards = plan_shards(config.data)
    t0 = time.perf_counter()
    with progress_bar(console, live) as bar:
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

        refuse_custom_code(resume.directory)
        tokenizer = AutoTokenizer.from_pretrained(resume.directory, trust_remote_code=False)
        model: PreTrainedModel = AutoModelForCausalLM.from_pretrained(
            resume.directory, dtype=torch.float32, trust_remote_code=False
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
    model = model.to(device)  # type: ignore[arg-type]
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
        f"{'bf16 autocast' if bf16 else 'fp32'} on {device}"
    )
    card = policy_card(config.prompt)  # eval and RL read the prompt style from it
    metrics = (run_dir / "metrics.jsonl").open("a", encoding="utf-8")
    model.train()
    train_started = time.perf_counter()
    seen = sum(len(transcripts[i]) for batch in plan[:first] for i in batch)
    with progress_bar(console, live) as bar:
        job = bar.add_task("pretrain", total=t.steps, completed=first)
        for step in range(first, t.steps):
            t1 = time.perf_counter()
            loss, padded, targets = step_loss(
                model, transcripts, plan[step], t.micro_batch_tokens, tokenizer.pad_token_id, bf16
            )
            torch.nn.utils.clip_grad_norm_(model.parameters(), MAX_GRAD_NORM)
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
                if not live:  # a line a checkpoint where no bar can redraw
                    console.print(
                        f"pretrain step {done}/{t.steps}: loss {loss:.3f}, "
                        f"{tokens / seconds:,.0f} tok/s"
                    )
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
        "device": str(device),
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
