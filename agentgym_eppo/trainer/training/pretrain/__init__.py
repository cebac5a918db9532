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
   a Qwen2 causal LM (:mod:`..models`).
3. **Training.** Next-token cross-entropy on the agent's turns of the episodes, in the
   exact token layout of the rollouts (:func:`..sft.expert_transcript`, the config's
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

The modules: :mod:`.config` (the YAML config, checked on load), :mod:`.demonstrators`
(the expert and the hasty demonstrator), :mod:`.data` (the shards: plan, play, load) and
:mod:`.loop` (the run's stages and the training loop).
"""

from .config import (
    SOURCES,
    TASKS,
    PretrainConfig,
    PretrainData,
    PretrainModel,
    PretrainTrain,
    load_pretrain_config,
)
from .data import Shard, build_data, load_episodes, plan_shards, play_shard
from .demonstrators import hasty_answers, play_expert, play_hasty
from .loop import plan_steps, pretrain, step_loss

__all__ = [
    "SOURCES",
    "TASKS",
    "PretrainConfig",
    "PretrainData",
    "PretrainModel",
    "PretrainTrain",
    "Shard",
    "build_data",
    "hasty_answers",
    "load_episodes",
    "load_pretrain_config",
    "plan_shards",
    "plan_steps",
    "play_expert",
    "play_hasty",
    "play_shard",
    "pretrain",
    "step_loss",
]
