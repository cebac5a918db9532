"""The pretraining's config: the data, the model and the optimisation, checked on load.

``agentgym-eppo pretrain --config configs/tiny-base.yaml`` reads a YAML file into
:class:`PretrainConfig` (with ``key=value`` overrides); every field carries its help.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentgym_eppo.registration import TASK_IDS

from ...config import build_config, read_config_values
from ...config_fields import help_field as _help
from ...devices import check_bf16, check_device
from ...rollout.chat import PROMPT_STYLES
from .demonstrators import hasty_answers

TASKS = TASK_IDS


SOURCES = ("fresh", "train")


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
            "(its registered blind answer, at its first turn, without using a tool) and kept "
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
    device: str = _help(
        "Where the model trains: auto (cuda when available) | cpu | cuda (the data is "
        "always generated on CPU, by data.workers processes).",
        "auto",
    )
    bf16: bool | str = _help(
        "bf16 autocast for the matmuls, fp32 master weights: auto (where device is a GPU, or a CPU with "
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
        answers = hasty_answers()
        for task, share in self.data.hasty.items():
            if task not in answers or task not in self.data.episodes or not 0 <= share < 1:
                raise ValueError(
                    f"data.hasty.{task}: {share!r} must be in [0, 1) for a task of data.episodes "
                    f"with a hasty answer ({sorted(answers)})"
                )
        if self.prompt not in PROMPT_STYLES:
            raise ValueError(f"prompt must be one of {PROMPT_STYLES}, got {self.prompt!r}")
        check_bf16(self.bf16)
        check_device(self.device)
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
    return build_config(PretrainConfig, read_config_values(path, overrides))
