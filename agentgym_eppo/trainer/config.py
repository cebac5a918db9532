"""Training configuration: typed dataclasses, loaded from YAML, overridden with ``key=value``.

Every knob documents itself (``metadata["help"]``) and names its source. The RL
algorithm's defaults come from :mod:`agentgym_eppo.trainer.algorithms.defaults` (the EPPO
paper's appendix A.2; verl where the paper says nothing; DAPO/DCPO/BAPO for their clip
baselines); the CPU demo (``configs/demo-cpu.yaml``) overrides what a tiny model trained
from scratch needs (a larger learning rate, short episodes, few steps).

Validation happens when the config is built (:meth:`TrainConfig.validate`): names are
looked up in the registries of advantage estimators and clip policies, and the chosen
clip policy and the EPPO pacer are built once, so a range they refuse fails at load,
not after an hour of SFT and evaluations. The ``clip`` section's fields are the
registered clip policies' own (:class:`ClipConfig`).

>>> config = load_config(None, ["rl.steps=3", "clip.policy=fixed"])
>>> config.rl.steps, config.clip.policy
(3, 'fixed')
"""

from __future__ import annotations

import copy
import dataclasses
import importlib
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from agentgym_eppo.core.registry import Registry, did_you_mean
from agentgym_eppo.core.tasks import TASK_SPLITS
from agentgym_eppo.registration import ENVIRONMENTS, TASK_IDS
from agentgym_eppo.trainer.algorithms import defaults as d
from agentgym_eppo.trainer.algorithms.advantages import ADVANTAGE_ESTIMATORS
from agentgym_eppo.trainer.algorithms.clip_policies import (
    CLIP_POLICIES,
    ClipPolicy,
    make_clip_policy,
    params_of,
    section_fields,
)
from agentgym_eppo.trainer.algorithms.pacer import PacerParams
from agentgym_eppo.trainer.devices import check_bf16, check_device
from agentgym_eppo.trainer.distributed.config import EngineConfig, RayConfig, ScaleConfig
from agentgym_eppo.trainer.rollout.chat import PROMPT_STYLES
from agentgym_eppo.vector.workers import BACKENDS

from .config_fields import help_field as _help

EVAL_STAGES = ("before_sft", "after_sft", "after_rl")
"""The stages the trainer evaluates at, in training order (``eval.stages``)."""

PROMPTS: Registry[str] = Registry(
    "prompt style",
    dict(
        zip(
            PROMPT_STYLES,
            (
                "the environment's system prompt and tool schemas (AgentBench's prompt)",
                "one line naming the task and the tool signatures (tiny models from scratch)",
            ),
            strict=True,
        )
    ),
)
"""``rollout.prompt`` -> what the prompt holds (the styles of the chat layer)."""


@dataclass
class ModelConfig:
    """The policy: a tiny Qwen2 built here, or a saved HF checkpoint."""

    path: str | None = _help(
        "A saved HF model directory (with its tokenizer); None builds a tiny Qwen2 from "
        "the fields below and a byte-level BPE tokenizer trained on expert trajectories. "
        "Default: unset (built).",
        None,
    )
    vocab_size: int = _help(
        "BPE vocabulary size of the built tokenizer. Default: ours (tiny model).", 4096
    )
    hidden_size: int = _help("Width of the built model. Default: ours (tiny model).", 128)
    layers: int = _help("Transformer layers of the built model. Default: ours (tiny model).", 4)
    heads: int = _help("Attention heads of the built model. Default: ours (tiny model).", 4)
    kv_heads: int = _help(
        "Key/value heads (grouped-query attention, as Qwen2). Default: ours (tiny model).", 2
    )
    intermediate_size: int | None = _help("MLP width. Default: unset = 4 x hidden_size.", None)
    max_position_embeddings: int = _help(
        "Longest context the model accepts (paper: 8,192 tokens per episode).", 8192
    )


@dataclass
class SFTConfig:
    """Supervised warm start on expert trajectories (every environment has an expert)."""

    enabled: bool = _help(
        "Train on expert trajectories before RL: a model trained from scratch must learn "
        "the tool-call format before RL can help. Default: ours.",
        True,
    )
    episodes_per_task: int = _help(
        "Expert episodes recorded per task (train split; instances cycled). Default: ours.", 64
    )
    episodes_by_task: dict[str, int] = field(
        default_factory=dict,
        metadata={
            "help": "Per-task exceptions to episodes_per_task, keyed on info['task_id'] "
            "(e.g. fewer of ALFWorld's long episodes, to bound the SFT's cost). Default: unset."
        },
    )
    epochs: int = _help("Passes over the expert episodes. Default: ours.", 3)
    lr: float = _help(
        "AdamW learning rate of the warm start. Default: ours (tiny model from scratch).", 1e-3
    )
    warmup_fraction: float = _help(
        "Share of the SFT steps over which the learning rate rises linearly to lr. Default: off.",
        0.0,
    )
    final_lr_fraction: float = _help(
        "The SFT learning rate decays along a cosine to this fraction of lr by the last "
        "step; the usual schedule for training from scratch. Default: off (1.0 keeps it "
        "constant).",
        1.0,
    )
    micro_batch_tokens: int = _help("Padded tokens per SFT micro-batch. Default: ours.", 8192)
    batch_episodes: int = _help("Episodes per SFT optimizer step. Default: ours.", 16)
    gradient_checkpointing: bool = _help(
        "Recompute activations in the backward pass: long episodes (ALFWorld's run to "
        "5,000 tokens) fit in memory at about a third more compute. Default: off.",
        False,
    )
    held_out_per_task: int = _help(
        "Train-split instances per task held out of the SFT: their expert episodes are "
        "never trained on and score the early stop (the weights of the lowest held-out "
        "loss are kept). The dev split stays untouched for evaluation. Default: off (0).",
        0,
    )
    held_out_every: int = _help(
        "Optimizer steps between two held-out losses (and one before the first step and "
        "after the last). Default: ours.",
        10,
    )
    patience: int = _help(
        "Held-out losses in a row without a new lowest that end the SFT early; 0 never "
        "ends it early (the best weights are kept all the same). Default: off (0).",
        0,
    )

    def __post_init__(self) -> None:
        self.check()

    def check(self) -> None:
        if not (0.0 <= self.warmup_fraction < 1.0 and 0.0 <= self.final_lr_fraction <= 1.0):
            raise ValueError(
                "sft.warmup_fraction must be in [0, 1) and sft.final_lr_fraction in [0, 1]"
            )
        if self.held_out_per_task < 0 or self.held_out_every < 1 or self.patience < 0:
            raise ValueError(
                "sft.held_out_per_task and sft.patience must be >= 0, sft.held_out_every >= 1"
            )


@dataclass
class RolloutConfig:
    """Multi-turn rollouts (EPPO paper, appendix A.2)."""

    group_size: int = _help(
        "G rollouts per task instance (GRPO groups; paper: 8 rollouts per prompt).", 8
    )
    temperature: float = _help("Sampling temperature of rollouts (paper: 0.8).", d.TEMPERATURE)
    max_tokens_per_turn: int = _help(
        "Tokens the model may write per turn (paper: 1,024).", d.MAX_TOKENS_PER_TURN
    )
    max_context: int = _help(
        "Longest episode in tokens (paper: 8,192); overflow ends it as agent_context_limit.",
        d.MAX_CONTEXT,
    )
    max_turns: int | None = _help(
        "Turn limit for every task (paper: 20); None keeps each task's AgentBench limit.", None
    )
    generation_batch: int = _help(
        "Most contexts one generate call batches. Default: ours (CPU-sized).", 64
    )
    prompt: str = _help(
        "full: the environment's system prompt and tool schemas (AgentBench's prompt); "
        "compact: one line naming the task and tool signatures, for tiny models trained "
        "from scratch (SFT, RL and eval all use it).",
        "full",
    )
    backend: str = _help(
        "MultiTaskVectorEnv back-end: serial | subprocess | ray. Default: ours (one process "
        "per env worker: a crash or a hang stays in its process).",
        "subprocess",
    )

    def __post_init__(self) -> None:
        self.check()

    def check(self) -> None:
        PROMPTS.lookup(self.prompt, where="rollout.prompt")
        BACKENDS.lookup(self.backend, where="rollout.backend")
        if self.temperature <= 0:
            raise ValueError(
                f"rollout.temperature must be > 0 (RL samples), got {self.temperature}"
            )
        if self.group_size < 1:
            raise ValueError(f"rollout.group_size must be >= 1, got {self.group_size}")
        if self.max_tokens_per_turn < 1 or self.max_context < 2:
            raise ValueError("rollout.max_tokens_per_turn must be >= 1 and max_context >= 2")


@dataclass
class AlgorithmConfig:
    """Advantage estimator and loss terms (EPPO paper, sections 3.2-3.3 and appendix A.2)."""

    advantage: str = _help(
        "grpo (group mean/std, eq. 2) or rloo (leave-one-out; the paper's appendix B).",
        d.ADVANTAGE,
    )
    task_adv_norm: bool = _help(
        "Task advantage normalization (AgentRL; paper eq. 4): standardise each task's "
        "token advantages in the batch.",
        d.TASK_ADV_NORM,
    )
    task_norm_over: str = _help(
        "Which episodes enter eq. 4's per-task mean and std. all: every episode of the "
        "task (the paper's and AgentRL's); a group whose rewards are all equal "
        "(advantage 0) then comes out at -mean/std of its task on every token whenever "
        "the task's token-weighted mean is not 0, i.e. when successes and failures differ "
        "in length. mixed_groups: only groups whose rewards differ; an equal group keeps "
        "advantage 0. Default: the paper's (all).",
        d.TASK_NORM_OVER,
    )
    kl_coef: float = _help(
        "Coefficient of the k3 KL to the frozen reference (paper: 1e-4).", d.KL_COEF
    )
    entropy_coef: float = _help("Entropy bonus coefficient (paper: 0).", d.ENTROPY_COEF)
    dual_clip_c: float | None = _help(
        "Dual clip constant for negative advantages (paper: 3.0); None disables it.",
        d.DUAL_CLIP_C,
    )

    def __post_init__(self) -> None:
        self.check()

    def check(self) -> None:
        ADVANTAGE_ESTIMATORS.lookup(self.advantage, where="algorithm.advantage")
        if self.task_norm_over not in d.TASK_NORM_OVER_CHOICES:
            raise ValueError(
                f"algorithm.task_norm_over must be one of {', '.join(d.TASK_NORM_OVER_CHOICES)}, "
                f"got {self.task_norm_over!r}"
            )
        if self.kl_coef < 0 or self.entropy_coef < 0:
            raise ValueError(
                f"algorithm.kl_coef and algorithm.entropy_coef must be >= 0, got "
                f"{self.kl_coef}, {self.entropy_coef}"
            )
        if self.dual_clip_c is not None and self.dual_clip_c <= 1:
            raise ValueError(
                f"algorithm.dual_clip_c must be > 1 (or null to turn it off), got "
                f"{self.dual_clip_c}"
            )


@dataclass
class ClipConfig:
    """Where the ratio bounds come from (section 5.1's baselines).

    ``policy`` names a registered clip policy; every other field is declared by a
    registered policy, on its class (``Params``), and laid out here by
    :func:`~agentgym_eppo.trainer.algorithms.clip_policies.section_fields`. The fields
    are declared again whenever a policy is registered
    (:func:`~agentgym_eppo.trainer.algorithms.clip_policies.register_clip_policy`), so a
    policy added from user code is configured, validated and dumped like the built-in
    ones.
    """

    policy: str = _help("", d.CLIP_POLICY)  # declared again below, with the registry's help

    def __post_init__(self) -> None:
        self.check()

    def check(self) -> None:
        """The chosen policy is built once: its range checks are the ones that apply."""
        CLIP_POLICIES.lookup(self.policy, where="clip.policy")
        self.pacer.check()
        try:
            self.build()
        except ValueError as error:
            raise ValueError(f"clip.policy={self.policy}: {error}") from None

    def build(self) -> ClipPolicy:
        """A new instance of the chosen policy with its configured ``Params``."""
        return make_clip_policy(self.policy, self.params())

    def params(self, name: str | None = None) -> Any:
        """The ``Params`` of the policy ``name`` (default: the chosen one) as configured."""
        return params_of(self, name or self.policy)

    @property
    def pacer(self) -> PacerParams:
        """The pacer's settings, ``clip.eppo``: the run paces every task under every
        policy, for its metrics (:class:`~agentgym_eppo.trainer.algorithms.pacer.TaskPacing`)."""
        params: PacerParams = self.params("eppo")
        return params


def _policy_help() -> str:
    names = " | ".join(CLIP_POLICIES)
    return (
        f"The clip policy, by its registered name: {names} (register_clip_policy adds one, "
        "see docs/trainer.md). Default: EPPO, the paper's method."
    )


def _declare_clip_fields() -> None:
    """Declare :class:`ClipConfig`'s fields again: ``policy``, then the keys of every
    registered policy in registration order (``CLIP_POLICIES`` calls it on each change)."""
    rows: list[tuple[str, Any, Any]] = [
        ("policy", str, field(default=d.CLIP_POLICY, metadata={"help": _policy_help()}))
    ]
    for name, policy in CLIP_POLICIES.items():
        rows += section_fields(name, policy)
    generated = ("__init__", "__repr__", "__eq__", "__hash__", "__match_args__")
    for attr in (*generated, *ClipConfig.__dataclass_fields__, "__dataclass_fields__"):
        if attr in ClipConfig.__dict__:
            delattr(ClipConfig, attr)
    ClipConfig.__annotations__ = {key: kind for key, kind, _ in rows}
    for key, _, declared in rows:
        setattr(ClipConfig, key, declared)
    dataclass(ClipConfig)


_declare_clip_fields()
CLIP_POLICIES.watch(_declare_clip_fields)


@dataclass
class RLConfig:
    """The RL loop and its optimizer (EPPO paper, appendix A.2)."""

    steps: int = _help("Training steps (paper: 700).", 700)
    lr: float = _help("AdamW learning rate (paper: 1e-5).", d.LR)
    weight_decay: float = _help("AdamW weight decay (paper: 0).", d.WEIGHT_DECAY)
    max_grad_norm: float = _help("Gradient norm clip (verl: 1.0).", d.MAX_GRAD_NORM)
    ppo_epochs: int = _help("Passes over each step's rollouts (verl: 1).", d.PPO_EPOCHS)
    mini_batches: int = _help(
        "Optimizer steps per pass (verl: 4, a 1,024 batch in mini-batches of 256; the paper "
        "does not say). Every mini-batch after the first is off-policy, which is what "
        "gives the clip range something to act on: with 1 (and one epoch) every ratio is "
        "1 and every clip policy is GRPO.",
        d.MINI_BATCHES,
    )
    micro_batch_tokens: int = _help(
        "Padded tokens per micro-batch (paper: 16,384); gradients accumulate.",
        d.MICRO_BATCH_TOKENS,
    )
    logprob_chunk: int = _help(
        "Positions per chunk of the log-prob/entropy computation. Default: ours (bounds "
        "the [chunk, vocabulary] logits in memory).",
        d.LOGPROB_CHUNK,
    )
    skip_zero_advantage: bool = _help(
        "Leave episodes whose advantage is exactly 0 (a task whose groups all ended alike, "
        "e.g. all at the context limit) out of the update's forward/backward and reference "
        "scoring. Their policy-gradient term is 0 and the token-mean denominator still "
        "counts them, so the update differs from the full one only by their KL and entropy "
        "terms. Off by default (the paper trains on every episode).",
        False,
    )
    old_logprobs: str = _help(
        "Where the importance ratio's old log-probs and the pacer's entropy come from: "
        "'rollout', the in-process engine's scores of the tokens it sampled (verl's bypass "
        "mode; any episode an engine did not score, e.g. from a stale or remote engine, is "
        "re-scored); 'rescore', a forward of the weights the update starts from over every "
        "episode (verl's decoupled mode). The in-process engine samples with those very "
        "weights, so the two agree within float error; 'rollout' skips a forward, but a "
        "resumed run then matches an uninterrupted one in tokens and weights and not in "
        "the last digits of the first sampled token's scores, so 'rescore' is the default. "
        "FSDP always re-scores.",
        d.OLD_LOGPROBS,
    )
    dynamic_sampling_rounds: int = _help(
        "DAPO's dynamic sampling (arXiv 2503.14476, sec. 3.2): with more than 1, a step "
        "plays rounds of fresh groups (every slot, new instances) and trains only the groups "
        "whose rewards differ, stopping once it holds as many such groups as one round has "
        "groups, or after this many rounds. 1 = off: one round, every group trained (the "
        "paper's way).",
        1,
    )
    save_every: int = _help("Checkpoint every this many steps (and at the end). Default: ours.", 10)
    keep_checkpoints: int = _help("How many RL checkpoints to keep. Default: ours.", 2)

    def __post_init__(self) -> None:
        self.check()

    def check(self) -> None:
        if self.steps < 0 or self.ppo_epochs < 1 or self.mini_batches < 1:
            raise ValueError("rl.steps must be >= 0, rl.ppo_epochs and rl.mini_batches >= 1")
        if self.lr <= 0 or self.weight_decay < 0 or self.max_grad_norm <= 0:
            raise ValueError(
                f"rl.lr and rl.max_grad_norm must be > 0 and rl.weight_decay >= 0, got "
                f"{self.lr}, {self.max_grad_norm}, {self.weight_decay}"
            )
        if self.micro_batch_tokens < 1 or self.logprob_chunk < 1:
            raise ValueError("rl.micro_batch_tokens and rl.logprob_chunk must be >= 1")
        if self.old_logprobs not in d.OLD_LOGPROBS_SOURCES:
            raise ValueError(
                f"rl.old_logprobs must be one of {', '.join(d.OLD_LOGPROBS_SOURCES)}, "
                f"got {self.old_logprobs!r}"
            )
        if self.dynamic_sampling_rounds < 1:
            raise ValueError("rl.dynamic_sampling_rounds must be >= 1 (1 = off)")
        if self.save_every < 1 or self.keep_checkpoints < 1:
            raise ValueError("rl.save_every and rl.keep_checkpoints must be >= 1")


@dataclass
class EvalConfig:
    """Evaluation on held-out instances."""

    split: str = _help(
        "Task split evaluated: train | dev | test. Default: AgentBench's dev split.", "dev"
    )
    tasks: list[str] | None = field(
        default=None,
        metadata={
            "help": "Tasks evaluated; None = the trained ones (``tasks``): RL on a subset "
            "can still be scored on every task. Default: unset."
        },
    )
    stages: list[str] = field(
        default_factory=lambda: list(EVAL_STAGES),
        metadata={
            "help": "When to evaluate: before_sft, after_sft, after_rl. Default: ours (all)."
        },
    )
    max_instances_per_task: int | None = _help(
        "Instances per task. Default: unset (all of the split, as AgentBench).", None
    )
    instances_by_task: dict[str, int] = field(
        default_factory=dict,
        metadata={
            "help": "Per-task exceptions to max_instances_per_task, keyed on info['task_id']: "
            "long tasks (ALFWorld, WebShop) can play fewer episodes than short ones. "
            "Default: unset."
        },
    )
    temperature: float = _help(
        "0 = greedy decoding. Default: ours (greedy, as AgentBench scores agents).", 0.0
    )
    samples_per_instance: int = _help(
        "Attempts per instance (success is averaged). Default: ours (one, as AgentBench).", 1
    )
    instance_seed: int = _help(
        "Seed of the draw of evaluated instances (when fewer than the split are played). "
        "Fixed whatever the run's seed, so that every run of a comparison plays the same "
        "instance ids and evaluations pair episode by episode; the run's seed still drives "
        "the sampling. Default: ours (0).",
        0,
    )
    slots_per_task: int = _help(
        "Instances of a task played side by side. Part of the protocol: which sample each "
        "attempt draws depends on it, so it is fixed here rather than taken from the "
        "training slots (two layouts of one model differed by 0.012 in mean dev success). "
        "Default: ours.",
        16,
    )

    def __post_init__(self) -> None:
        self.check()

    def check(self) -> None:
        TASK_SPLITS.lookup(self.split, where="eval.split")
        unknown = [stage for stage in self.stages if stage not in EVAL_STAGES]
        if unknown:
            raise ValueError(f"eval.stages may hold {EVAL_STAGES}, got {unknown}")
        if self.tasks is not None and not self.tasks:
            raise ValueError(
                "eval.tasks must name at least one task (or be null: the trained ones)"
            )
        for name in self.tasks or ():
            check_task_name(name, "eval.tasks")
        if self.temperature < 0 or self.samples_per_instance < 1:
            raise ValueError("eval.temperature must be >= 0 and eval.samples_per_instance >= 1")
        if self.slots_per_task < 1:
            raise ValueError("eval.slots_per_task must be >= 1")


@dataclass
class TrainConfig:
    """Everything ``agentgym-eppo train`` needs (see ``configs/demo-cpu.yaml``)."""

    seed: int = _help("Seeds model init, sampling, task draws. Default: ours.", 0)
    output_dir: str = _help(
        "Run directory (metrics, checkpoints, evals, plots). Default: ours.", "runs/eppo"
    )
    init_checkpoint: str | None = _help(
        "Start RL from this saved checkpoint (e.g. RUN_DIR/checkpoints/sft); skips building "
        "and SFT. Default: unset (build, or load model.path, then SFT).",
        None,
    )
    resume: bool = _help(
        "Continue the run in output_dir from its latest RL checkpoint, exactly. Default: off.",
        False,
    )
    tasks: dict[str, int] = field(
        default_factory=lambda: dict.fromkeys(TASK_IDS, 8),
        metadata={
            "help": "task_id (or env id) -> rollout slots, a multiple of rollout.group_size. "
            "Default: AgentBench's five tasks, one group of the paper's 8 rollouts each."
        },
    )
    skip_unavailable_tasks: bool = _help(
        "Drop (with a message) tasks whose environment is not registered in this install, "
        "instead of failing; the demo uses it to run on whichever tasks exist. Default: off.",
        False,
    )
    env_kwargs: dict[str, dict[str, Any]] = field(
        default_factory=dict,
        metadata={"help": "Constructor keywords per task. Default: unset (each task's own)."},
    )
    threads: int | None = _help(
        "torch.set_num_threads for the trainer. Default: unset (torch's own).", None
    )
    device: str = _help(
        "Where the policy runs: auto (cuda when available) | cpu | cuda. Default: ours.", "auto"
    )
    bf16: bool | str = _help(
        "bf16 autocast: auto (where device is a GPU, or a CPU with avx512_bf16/AMX whose kernels run at "
        "AVX-512, not held to AVX2) | true | false. "
        "Default: ours (the paper trains in bf16 on GPUs).",
        "auto",
    )
    tensorboard: bool = _help("Also write TensorBoard event files. Default: ours.", True)
    progress: bool = _help("Show a rich progress bar. Default: ours.", True)
    imports: list[str] = field(
        default_factory=list,
        metadata={
            "help": "Modules imported before the rest of the config is read: where user code "
            "registers its clip policies, advantage estimators or tasks "
            "(register_clip_policy, register_task), so that the config, compare and every "
            "process of the run know them. Default: unset."
        },
    )
    model: ModelConfig = field(default_factory=ModelConfig, metadata={"help": "The policy."})
    sft: SFTConfig = field(default_factory=SFTConfig, metadata={"help": "Expert warm start."})
    rollout: RolloutConfig = field(default_factory=RolloutConfig, metadata={"help": "Rollouts."})
    algorithm: AlgorithmConfig = field(
        default_factory=AlgorithmConfig, metadata={"help": "Advantages and loss."}
    )
    clip: ClipConfig = field(default_factory=ClipConfig, metadata={"help": "Clip policy."})
    rl: RLConfig = field(default_factory=RLConfig, metadata={"help": "RL loop."})
    eval: EvalConfig = field(default_factory=EvalConfig, metadata={"help": "Evaluation."})
    ray: RayConfig = field(
        default_factory=RayConfig,
        metadata={"help": "Ray cluster (None: one process; ray.address=auto joins a cluster)."},
    )
    engine: EngineConfig = field(
        default_factory=EngineConfig,
        metadata={"help": "RL rollout engine: hf | sglang | sglang-server (docs/scaling.md)."},
    )

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> TrainConfig:
        """Raise ``ValueError`` naming the field of any inconsistent setting; return self.

        Runs when the config is built (and again when asked, after an edit), before
        anything expensive: each section checks itself (the chosen clip policy and the
        EPPO pacer, whose metrics run under every policy, are built once), then the
        settings that span sections.
        """
        import_modules(self.imports)
        for section in (self.sft, self.rollout, self.algorithm, self.clip, self.rl, self.eval):
            section.check()
        ScaleConfig(self.ray, self.engine).validate()
        check_bf16(self.bf16)
        check_device(self.device)
        if not self.tasks:
            raise ValueError("tasks must name at least one task")
        for task_id, slots in self.tasks.items():
            check_task_name(task_id, "tasks")
            if slots < 1 or slots % self.rollout.group_size:
                raise ValueError(
                    f"tasks.{task_id} = {slots} slots must be a positive multiple of "
                    f"rollout.group_size ({self.rollout.group_size})"
                )
        without = [t for t in self.tasks if t in ENVIRONMENTS and not ENVIRONMENTS[t].expert]
        if without and self.records_expert_episodes:
            raise ValueError(
                f"tasks {without} register no expert, and this run records expert episodes "
                "(for the SFT, and for the tokenizer it builds); start from a model "
                "(model.path with sft.enabled=false) or a checkpoint (init_checkpoint)"
            )
        return self

    @property
    def records_expert_episodes(self) -> bool:
        """Whether a fresh run (not a resumed one) plays every task's expert first: for
        the SFT, or for the tokenizer a built model needs."""
        return self.init_checkpoint is None and (self.model.path is None or self.sft.enabled)

    def without_tasks(self, names: Sequence[str]) -> TrainConfig:
        """A copy without the tasks ``names``, in ``tasks`` and ``eval.tasks``, and without
        their per-task settings (which would name a task the run lacks)."""
        trimmed = copy.deepcopy(self)
        trimmed.tasks = {name: slots for name, slots in self.tasks.items() if name not in names}
        if trimmed.eval.tasks is not None:
            trimmed.eval.tasks = [name for name in trimmed.eval.tasks if name not in names]
        for per_task in (trimmed.sft.episodes_by_task, trimmed.eval.instances_by_task):
            for name in names:
                per_task.pop(name, None)
        return trimmed.validate()


def check_task_name(name: str, where: str) -> None:
    """A task is named by its id (``db``) or by a Gymnasium id (``AgentBench-DB-v0``,
    ``module:Env-v0``, registered when the run starts); a name that is neither is a
    one-line error with the closest task id."""
    if name not in ENVIRONMENTS and "-v" not in name:
        ENVIRONMENTS.lookup(name, where=where)


def _convert(kind: Any, value: Any, where: str) -> Any:
    """Check/convert a YAML value to the annotated type ``kind``."""
    origin = typing.get_origin(kind)
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(kind)
        if value is None and type(None) in options:
            return None
        errors = []
        for option in options:
            if option is type(None):
                continue
            try:
                return _convert(option, value, where)
            except (TypeError, ValueError) as error:
                errors.append(str(error))
        raise TypeError(errors[0] if errors else f"{where}: cannot be None")
    if dataclasses.is_dataclass(kind):
        if not isinstance(value, Mapping):
            raise TypeError(f"{where}: expected a mapping, got {value!r}")
        return _build(kind, value, where)
    if origin is dict:
        if not isinstance(value, Mapping):
            raise TypeError(f"{where}: expected a mapping, got {value!r}")
        key_type, value_type = typing.get_args(kind)
        return {
            _convert(key_type, k, where): _convert(value_type, v, f"{where}.{k}")
            for k, v in value.items()
        }
    if origin is list:
        if not isinstance(value, Sequence) or isinstance(value, str):
            raise TypeError(f"{where}: expected a list, got {value!r}")
        (item_type,) = typing.get_args(kind)
        return [_convert(item_type, item, where) for item in value]
    if kind is Any:
        return value
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if kind is float and isinstance(value, str):
        try:  # YAML 1.1 reads 1e-5 (no dot) as a string
            return float(value)
        except ValueError:
            raise TypeError(f"{where}: expected a number, got {value!r}") from None
    if kind is bool and not isinstance(value, bool):
        raise TypeError(f"{where}: expected true or false, got {value!r}")
    if kind is int and isinstance(value, bool):
        raise TypeError(f"{where}: expected an integer, got {value!r}")
    if not isinstance(value, kind):
        raise TypeError(f"{where}: expected {kind.__name__}, got {value!r}")
    return value


def _build(cls: Any, values: Mapping[str, Any], where: str) -> Any:
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - names)
    if unknown:
        prefix = f"{where}." if where else ""
        hint = did_you_mean(unknown[0], sorted(names), show=lambda name: f"{prefix}{name}")
        raise ValueError(
            f"unknown config key {prefix}{unknown[0]}{hint}; known: {', '.join(sorted(names))}"
        )
    kwargs = {
        name: _convert(hints[name], value, f"{where}.{name}" if where else name)
        for name, value in values.items()
    }
    return cls(**kwargs)


def import_modules(modules: Sequence[str], where: str = "imports") -> None:
    """Import each module (``imports``): its registrations run before anything names them."""
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError as error:
            raise ValueError(f"{where}: cannot import {module!r} ({error})") from None


def config_from_dict(values: Mapping[str, Any]) -> TrainConfig:
    """Build and validate a :class:`TrainConfig` from nested plain values (the modules of
    ``imports`` first, so that what they register is known to the sections)."""
    import_modules(_convert(list[str], values.get("imports") or [], "imports"))
    config: TrainConfig = _build(TrainConfig, values, "")
    return config.validate()


def apply_override(values: dict[str, Any], override: str) -> None:
    """Apply one ``dotted.key=value`` (value parsed as YAML) to nested ``values`` in place."""
    if "=" not in override:
        raise ValueError(f"an override is key=value, e.g. rl.steps=10; got {override!r}")
    key, raw = override.split("=", 1)
    parts = key.strip().split(".")
    node = values
    for part in parts[:-1]:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ValueError(f"{key}: {part} is not a section")
        node = child
    node[parts[-1]] = yaml.safe_load(raw)


def read_config_values(path: str | Path | None, overrides: Sequence[str] = ()) -> dict[str, Any]:
    """The plain values of a YAML config (None = none) with ``key=value`` overrides applied."""
    values: dict[str, Any] = {}
    if path is not None:
        loaded = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
        if loaded is not None and not isinstance(loaded, dict):
            raise ValueError(f"{path}: a config is a YAML mapping, got {type(loaded).__name__}")
        values = loaded or {}
    for override in overrides:
        apply_override(values, override)
    return values


def load_config(path: str | Path | None, overrides: Sequence[str] = ()) -> TrainConfig:
    """Read a YAML config (None = all defaults), apply ``key=value`` overrides, validate."""
    return config_from_dict(read_config_values(path, overrides))


def config_fields(
    cls: Any = None, prefix: str = ""
) -> list[tuple[str, dataclasses.Field[Any], Any]]:
    """``(dotted name, field, default)`` of every leaf field of ``cls`` (a config section,
    default :class:`TrainConfig`), sections opened in declaration order."""
    rows: list[tuple[str, dataclasses.Field[Any], Any]] = []
    for f in dataclasses.fields(cls or TrainConfig):
        missing = f.default is dataclasses.MISSING
        default = f.default_factory() if missing else f.default  # type: ignore[operator]
        if dataclasses.is_dataclass(default):
            rows += config_fields(type(default), f"{prefix}{f.name}.")
        else:
            rows.append((f"{prefix}{f.name}", f, default))
    return rows


def describe_config(config: TrainConfig | None = None) -> str:
    """Every field of ``config`` (None: the defaults) as ``name = value``, with its default
    when the value differs, then its help (which names where the default comes from);
    what ``agentgym-eppo train --show-config`` prints.

    >>> print(describe_config().splitlines()[0])
    seed = 0
    >>> "rl.lr = 1e-05" in describe_config(load_config(None, ["rl.lr=1e-5"]))
    True
    """
    values = config_to_dict(config or TrainConfig())
    lines = []
    for name, f, default in config_fields():
        value: Any = values
        for part in name.split("."):
            value = value[part]
        changed = "" if value == default else f"  (default {default!r})"
        lines.append(f"{name} = {value!r}{changed}")
        lines.append(f"    {f.metadata['help']}")
    return "\n".join(lines)


def config_to_dict(config: TrainConfig) -> dict[str, Any]:
    return dataclasses.asdict(config)


def dump_config(config: TrainConfig, path: str | Path) -> None:
    """Write the resolved config as YAML (``RUN_DIR/config.yaml``)."""
    Path(path).write_text(yaml.safe_dump(config_to_dict(config), sort_keys=False), encoding="utf-8")
