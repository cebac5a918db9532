"""The pretraining's data: expert (and hasty) episodes of task instances, in shards.

For every task family, fresh instances from its generator with new seeds
(:func:`agentgym_eppo.environments.fresh.fresh_tasks`: every dev and test instance is
dropped by content hash) or, where a config says ``source: train``, the shipped train
split. The demonstrators (:mod:`.demonstrators`) play each instance and the episodes
kept are written as shards (``data/<task>-<k>.jsonl.gz``, atomically; a finished shard
is never redone), played by ``data.workers`` spawned processes.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import os
import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import torch

from ..sft import ExpertEpisode
from .config import PretrainConfig, PretrainData
from .demonstrators import hasty_answers, play_expert, play_hasty


@dataclass(frozen=True)
class Shard:
    """One unit of the data stage: ``count`` instances of one task, played in one process."""

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
                episode = play_hasty(env, index, hasty_answers()[shard.task_id])
            else:
                episode = play_expert(env, index)
            if episode.success or episode.demonstrator == "hasty":
                episodes.append({**dataclasses.asdict(episode), "content_hash": digest})
    finally:
        env.close()
    return episodes


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
