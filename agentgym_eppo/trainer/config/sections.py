"""The run's config sections: the model, the SFT, the rollouts, the algorithm, the RL
loop and the evaluations (``model.*``, ``sft.*``, ``rollout.*``, ``algorithm.*``,
``rl.*``, ``eval.*``), each checking itself when built.

>>> RolloutConfig(group_size=4).group_size
4
"""

from __future__ import annotations

from dataclasses import dataclass, field

from agentgym_eppo.core.registry import Registry
from agentgym_eppo.core.tasks import TASK_SPLITS
from agentgym_eppo.registration import ENVIRONMENTS
from agentgym_eppo.trainer.algorithms import defaults as d
from agentgym_eppo.trainer.algorithms.advantages import ADVANTAGE_ESTIMATORS
from agentgym_eppo.trainer.config_fields import help_field as _help
from agentgym_eppo.trainer.rollout.chat import PROMPT_STYLES
from agentgym_eppo.vector.workers import BACKENDS

EVAL_STAGES = ("base", "after_sft", "after_rl")
"""The stages the trainer evaluates at, in training order (``eval.stages``), each named
after what ran before it: ``base`` is the policy as loaded or built, before any training."""

RENAMED_STAGES = {"before_sft": "base"}
"""Stages by their old names: run folders written before a rename hold ``eval_<old>.json``
(read as the new stage); a config naming the old one is refused."""

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
    held_out_average: str = _help(
        "How the held-out tasks' losses pool into the one the early stop minimises: "
        "'tokens', one token mean over all (the tasks of long episodes then outweigh the "
        "others), or 'tasks', the mean of each task's token mean. Default: ours ('tokens', "
        "the pooling of the earlier runs).",
        "tokens",
    )
    patience: int = _help(
        "Held-out losses in a row without a new lowest that end the SFT early; 0 never "
        "ends it early (the best weights are kept all the same). Default: off (0).",
        0,
    )
    save_every: int = _help(
        "Optimizer steps between two saves of the SFT's state (sft_state/ in the run "
        "folder), from which resume=true continues an SFT killed mid-stage. Default: off (0).",
        0,
    )

    def __post_init__(self) -> None:
        if not (0.0 <= self.warmup_fraction < 1.0 and 0.0 <= self.final_lr_fraction <= 1.0):
            raise ValueError(
                "sft.warmup_fraction must be in [0, 1) and sft.final_lr_fraction in [0, 1]"
            )
        if self.held_out_per_task < 0 or self.held_out_every < 1 or self.patience < 0:
            raise ValueError(
                "sft.held_out_per_task and sft.patience must be >= 0, sft.held_out_every >= 1"
            )
        if self.save_every < 0:
            raise ValueError("sft.save_every must be >= 0 (0 = off)")
        if self.held_out_average not in d.HELD_OUT_AVERAGE_CHOICES:
            raise ValueError(
                f"sft.held_out_average must be one of {', '.join(d.HELD_OUT_AVERAGE_CHOICES)}, "
                f"not {self.held_out_average!r}"
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
class RLConfig:
    """The RL loop and its optimizer (EPPO paper, appendix A.2)."""

    steps: int = _help("Training steps (paper: 700).", 700)
    lr: float = _help("AdamW learning rate (paper: 1e-5).", d.LR)
    warmup_steps: int = _help(
        "RL steps over which the learning rate rises linearly to lr: step t of the first "
        "warmup_steps (counted from 1) runs at lr * t / warmup_steps, all its optimizer "
        "steps alike. Default: off (0 = lr from the first step).",
        0,
    )
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
        if self.steps < 0 or self.ppo_epochs < 1 or self.mini_batches < 1:
            raise ValueError("rl.steps must be >= 0, rl.ppo_epochs and rl.mini_batches >= 1")
        if self.lr <= 0 or self.weight_decay < 0 or self.max_grad_norm <= 0:
            raise ValueError(
                f"rl.lr and rl.max_grad_norm must be > 0 and rl.weight_decay >= 0, got "
                f"{self.lr}, {self.max_grad_norm}, {self.weight_decay}"
            )
        if self.warmup_steps < 0:
            raise ValueError(f"rl.warmup_steps must be >= 0 (0 = off), got {self.warmup_steps}")
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
            "help": "When to evaluate: base (the policy as loaded or built), after_sft, "
            "after_rl. Default: ours (all)."
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
        TASK_SPLITS.lookup(self.split, where="eval.split")
        for stage in self.stages:
            if stage in RENAMED_STAGES:
                raise ValueError(f"eval.stages: {stage!r} is now called {RENAMED_STAGES[stage]!r}")
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


def check_task_name(name: str, where: str) -> None:
    """A task is named by its id (``db``) or by a Gymnasium id (``AgentBench-DB-v0``,
    ``module:Env-v0``, registered when the run starts); a name that is neither is a
    one-line error with the closest task id."""
    if name not in ENVIRONMENTS and "-v" not in name:
        ENVIRONMENTS.lookup(name, where=where)
