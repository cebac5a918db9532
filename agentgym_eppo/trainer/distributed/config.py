"""Config sections for running past one process: ``ray.*``, ``engine.*``, ``fsdp.*``.

The defaults are the single-process trainer (no Ray, the in-process HF engine, no
FSDP); setting ``ray.address`` switches the run to a Ray cluster (``local`` starts one
here, ``auto`` joins the cluster this node belongs to, ``ray://host:10001`` a remote
one). These are plain dataclasses in the style of :mod:`agentgym_eppo.trainer.config`
so that ``TrainConfig`` can hold them as fields and ``key=value`` overrides reach
them (``ray.address=auto``, ``engine.kind=sglang-server``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from agentgym_eppo.core.registry import Registry, did_you_mean
from agentgym_eppo.trainer.config_fields import help_field as _help

_LAUNCH = "agentgym_eppo.trainer.distributed.launch"


@dataclass(frozen=True)
class EngineKind:
    """One ``engine.kind``: what it runs, and its builder as ``"module:function"``
    (imported when a run builds its engine, so that this config layer imports none of
    the engines). The builder takes ``(scale, model, tokenizer, sync_dir, role, bf16,
    batch_size, seed)`` and returns a ``RolloutEngine`` holding ``model``'s weights;
    ``role`` is ``"fresh"``, or ``"stale"`` for the lagging copy of off-policy sampling."""

    description: str
    builder: str


ROLLOUT_ENGINES: Registry[EngineKind] = Registry(
    "rollout engine",
    {
        "hf": EngineKind(
            "transformers generate in the trainer, or in Ray actors", f"{_LAUNCH}:hf_engine"
        ),
        "sglang": EngineKind("an in-process sglang.Engine (gpu extra)", f"{_LAUNCH}:sglang_engine"),
        "sglang-server": EngineKind(
            "an SGLang server over HTTP", f"{_LAUNCH}:sglang_server_engine"
        ),
    },
)
"""``engine.kind`` -> its :class:`EngineKind` (``launch.make_rollout_engine`` builds it;
``ROLLOUT_ENGINES.register(name, EngineKind(...))`` adds one)."""
WEIGHT_SYNCS: Registry[str] = Registry(
    "weight sync",
    {
        "disk": "save, then /update_weights_from_disk (machines sharing a file system)",
        "tensor": "hand the tensors over (in-process engine only)",
    },
)
"""``engine.weight_sync`` -> how new weights reach SGLang."""


@dataclass
class RayConfig:
    """Where the env workers, rollout engines and trainer ranks run."""

    address: str | None = _help(
        "Default: unset = one process; 'local': start a Ray runtime here; 'auto': join "
        "this node's cluster; 'ray://host:port': a remote cluster.",
        None,
    )
    num_cpus: int | None = _help(
        "CPUs of a runtime started with address=local. Default: unset (Ray counts them).", None
    )
    env_worker_cpus: float = _help(
        "CPUs each env worker actor asks for: a fraction, so that hundreds of workers "
        "never wait for whole CPUs (Ray leaves an actor that asks for more CPUs than are "
        "free pending, with no error). Default: ours.",
        0.05,
    )
    envs_per_worker: int = _help("Env slots per worker actor. Default: ours.", 1)
    rollout_actors: int = _help("HF rollout engine actors (engine.kind=hf). Default: ours.", 1)
    rollout_actor_cpus: float = _help("CPUs per HF rollout actor. Default: ours.", 1.0)
    rollout_actor_gpus: float = _help("GPUs per HF rollout actor. Default: ours (CPU).", 0.0)
    trainer_ranks: int = _help(
        "Trainer ranks placed by a placement group (FSDP world). Default: ours.", 1
    )
    trainer_rank_cpus: float = _help("CPUs per trainer rank. Default: ours.", 1.0)
    trainer_rank_gpus: float = _help("GPUs per trainer rank. Default: ours (CPU).", 0.0)
    get_timeout_s: float = _help(
        "Upper bound on every ray.get: a hung actor becomes an error, never a hang. Default: ours.",
        600.0,
    )


@dataclass
class EngineConfig:
    """The rollout engine (EPPO paper appendix A: SGLang; sampling T = 0.8, top-p 1)."""

    kind: str = _help(
        "hf: transformers generate in the trainer (or in Ray actors); sglang: an "
        "in-process sglang.Engine (gpu extra); sglang-server: an SGLang server over HTTP.",
        "hf",
    )
    url: str = _help(
        "Base URL of the SGLang server (kind=sglang-server).", "http://127.0.0.1:30000"
    )
    weight_sync: str = _help(
        "How new weights reach SGLang: disk (save, then /update_weights_from_disk; works "
        "across machines sharing a file system) or tensor (in-process engine only).",
        "disk",
    )
    sync_dir: str | None = _help(
        "Where disk sync writes the weights. Default: unset = RUN_DIR/engine_weights.", None
    )
    top_p: float = _help("Nucleus sampling (paper: 1.0, the full distribution).", 1.0)
    top_k: int = _help("Top-k sampling (-1: off, the full distribution, as the paper samples).", -1)
    timeout_s: float = _help("HTTP timeout per request. Default: ours.", 600.0)
    mem_fraction_static: float = _help(
        "GPU memory share of sglang.Engine (kind=sglang). Default: ours (half: the "
        "trainer shares the GPU).",
        0.5,
    )
    tp_size: int = _help("Tensor parallel size of sglang.Engine. Default: ours (one GPU).", 1)
    stale_share: float = _help(
        "Off-policy (cross-policy) sampling, as AgentRL does it and the EPPO paper trains "
        "(appendix A: 25% more rollout resources for cross-policy sampling, the stale "
        "engines synced every 25 steps; stale_share=0.2 gives that fifth of all turns): the "
        "share of each generate call's contexts sent to a copy of the policy synced only "
        "every stale_every steps. 0 (the default) turns it off: every turn on-policy. A "
        "resumed run restarts the stale copy from the resumed weights.",
        0.0,
    )
    stale_every: int = _help(
        "Steps between syncs of the stale engine (EPPO paper, appendix A: 25).", 25
    )


@dataclass
class FSDPConfig:
    """FSDP2 training (``torch.distributed.fsdp.fully_shard``), launched by torchrun or Ray."""

    enabled: bool = _help("Shard the actor and the reference over the ranks. Default: off.", False)
    gradient_checkpointing: bool = _help(
        "Recompute decoder layers in the backward (paper appendix A: enabled).", True
    )
    reference_bf16: bool = _help(
        "Keep the frozen reference in bf16, the actor in fp32 (paper appendix A).", True
    )
    reshard_after_forward: bool = _help(
        "Free gathered parameters after each forward (ZeRO-3); False keeps them (ZeRO-2). "
        "Default: ours (least memory).",
        True,
    )
    backend: str | None = _help(
        "torch.distributed backend. Default: unset = nccl on GPU (the paper's), gloo on CPU.", None
    )


@dataclass
class ScaleConfig:
    """The three sections together (for code that wants them as one object)."""

    ray: RayConfig = field(default_factory=RayConfig, metadata={"help": "Ray cluster."})
    engine: EngineConfig = field(default_factory=EngineConfig, metadata={"help": "Engine."})
    fsdp: FSDPConfig = field(default_factory=FSDPConfig, metadata={"help": "FSDP2 training."})

    def validate(self) -> ScaleConfig:
        """Raise ``ValueError`` naming the field of any inconsistent setting; return self."""
        for name, value, table in (
            ("engine.kind", self.engine.kind, ROLLOUT_ENGINES),
            ("engine.weight_sync", self.engine.weight_sync, WEIGHT_SYNCS),
        ):
            if value not in table:
                raise ValueError(
                    f"{name} must be one of {tuple(table)}, got {value!r}"
                    f"{did_you_mean(value, table)}"
                )
        if self.engine.weight_sync == "tensor" and self.engine.kind == "sglang-server":
            raise ValueError(
                "engine.weight_sync=tensor needs engine.kind=sglang (a server on another "
                "machine cannot map the trainer's tensors); use disk"
            )
        if not 0.0 <= self.engine.stale_share < 1.0 or self.engine.stale_every < 1:
            raise ValueError("engine.stale_share must be in [0, 1) and engine.stale_every >= 1")
        if not 0 < self.ray.env_worker_cpus <= 64:
            raise ValueError(
                f"ray.env_worker_cpus must be in (0, 64], got {self.ray.env_worker_cpus}"
            )
        if self.ray.rollout_actors < 1 or self.ray.trainer_ranks < 1:
            raise ValueError("ray.rollout_actors and ray.trainer_ranks must be >= 1")
        if self.ray.get_timeout_s <= 0:
            raise ValueError("ray.get_timeout_s must be positive")
        return self
