"""Choosing and wiring the scaled pieces from a :class:`~.config.ScaleConfig`.

``make_policy_updater`` gives the single-process update or its FSDP2 form
(``fsdp.enabled``); ``make_rollout_engine`` picks the engine ``engine.kind`` names (in the trainer, in Ray
actors when ``ray.address`` is set, or SGLang) and wraps it for off-policy sampling
when ``engine.stale_share > 0``; ``make_vector_env`` puts the env workers in Ray actors
with fractional CPUs when ``ray.address`` is set. The step that runs over them is the
trainer's own, :func:`agentgym_eppo.trainer.rl_step.rl_step`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import torch
from transformers import PreTrainedModel

from agentgym_eppo.trainer.algorithms.clip_policies import ClipPolicy
from agentgym_eppo.trainer.rollout.engine import RolloutEngine
from agentgym_eppo.trainer.rollout.hf import HFGenerateEngine
from agentgym_eppo.trainer.rollout.stale import SnapshotHFEngine, StaleMixEngine
from agentgym_eppo.trainer.training.update import PolicyUpdater, UpdateSettings

from .config import ROLLOUT_ENGINES, ScaleConfig


def make_rollout_engine(
    scale: ScaleConfig,
    model: PreTrainedModel,
    tokenizer: Any,
    run_dir: str | Path,
    bf16: bool = False,
    batch_size: int = 64,
    seed: int = 0,
) -> RolloutEngine:
    """The rollout engine of ``scale.engine`` (already holding ``model``'s weights): the
    builder its ``engine.kind`` registers (:data:`~.config.ROLLOUT_ENGINES`)."""
    scale.validate()
    e = scale.engine
    sync_dir = Path(e.sync_dir) if e.sync_dir else Path(run_dir) / "engine_weights"
    module, _, name = ROLLOUT_ENGINES.lookup(e.kind, where="engine.kind").builder.partition(":")
    builder = getattr(importlib.import_module(module), name)

    def build(role: str) -> RolloutEngine:
        engine: RolloutEngine = builder(
            scale, model, tokenizer, sync_dir, role, bf16, batch_size, seed
        )
        return engine

    fresh = build("fresh")
    if e.stale_share == 0:
        return fresh
    return StaleMixEngine(fresh, build("stale"), e.stale_share, e.stale_every, seed)


def hf_engine(
    scale: ScaleConfig,
    model: PreTrainedModel,
    tokenizer: Any,
    sync_dir: Path,
    role: str,
    bf16: bool,
    batch_size: int,
    seed: int,
) -> RolloutEngine:
    """``engine.kind: hf``: transformers generate in the trainer, or in Ray actors when
    ``ray.address`` is set; the stale role samples from a snapshot of the weights."""
    r = scale.ray
    eos, pad = tokenizer.eos_token_id, tokenizer.pad_token_id
    if r.address is not None:
        from .ray_rollout import RayRolloutEngine

        options = {"num_cpus": r.rollout_actor_cpus, "num_gpus": r.rollout_actor_gpus}
        return RayRolloutEngine(
            model, eos, pad, r.rollout_actors, options, r.get_timeout_s, batch_size, bf16, seed
        )
    if role == "stale":
        return SnapshotHFEngine(model, eos, pad, batch_size, bf16)
    return HFGenerateEngine(model, eos, pad, batch_size, bf16)


def sglang_engine(
    scale: ScaleConfig,
    model: PreTrainedModel,
    tokenizer: Any,
    sync_dir: Path,
    role: str,
    bf16: bool,
    batch_size: int,
    seed: int,
) -> RolloutEngine:
    """``engine.kind: sglang``: an in-process ``sglang.Engine`` started from the
    trainer's weights (saved under ``sync_dir/role/initial``)."""
    from agentgym_eppo.trainer.rollout.sglang import SamplingSettings, SGLangInProcessEngine

    e = scale.engine
    initial = sync_dir / role / "initial"
    model.save_pretrained(initial)
    return SGLangInProcessEngine(
        initial,
        tokenizer.eos_token_id,
        SamplingSettings(e.top_p, e.top_k),
        sync=e.weight_sync,
        sync_dir=sync_dir / role,
        mem_fraction_static=e.mem_fraction_static,
        tp_size=e.tp_size,
    )


def sglang_server_engine(
    scale: ScaleConfig,
    model: PreTrainedModel,
    tokenizer: Any,
    sync_dir: Path,
    role: str,
    bf16: bool,
    batch_size: int,
    seed: int,
) -> RolloutEngine:
    """``engine.kind: sglang-server``: an SGLang server over HTTP, first given the
    trainer's weights."""
    from agentgym_eppo.trainer.rollout.sglang import SamplingSettings, SGLangServerEngine

    e = scale.engine
    server = SGLangServerEngine(
        e.url,
        tokenizer.eos_token_id,
        sync_dir / role,
        SamplingSettings(e.top_p, e.top_k),
        e.timeout_s,
    )
    server.update_weights(model)  # the server starts from the trainer's weights
    return server


def make_policy_updater(
    scale: ScaleConfig,
    model: PreTrainedModel,
    ref_model: PreTrainedModel | None,
    clip_policy: ClipPolicy,
    settings: UpdateSettings,
    pad_token_id: int,
    optimizer: Callable[[Iterable[torch.nn.Parameter]], torch.optim.Optimizer],
) -> PolicyUpdater:
    """The trainer's :class:`PolicyUpdater`, or with ``fsdp.enabled`` (under torchrun or
    Ray trainer ranks) its FSDP2 form: the actor sharded in fp32 with gradient
    checkpointing, the reference in bf16. ``optimizer`` builds the optimizer from the
    parameters (after sharding: FSDP2 replaces them with sharded ones)."""
    f = scale.fsdp
    if not f.enabled:
        return PolicyUpdater(
            model, optimizer(model.parameters()), clip_policy, settings, pad_token_id, ref_model
        )
    from .fsdp import FSDPPolicyUpdater, init_distributed, shard_model, shard_reference

    init_distributed(f.backend)
    actor = shard_model(
        model,
        gradient_checkpointing=f.gradient_checkpointing,
        reshard_after_forward=f.reshard_after_forward,
    )
    reference = shard_reference(ref_model, f.reference_bf16) if ref_model is not None else None
    return FSDPPolicyUpdater(
        actor, optimizer(actor.parameters()), clip_policy, settings, pad_token_id, reference
    )


def make_vector_env(
    scale: ScaleConfig,
    tasks: Mapping[str, int],
    group_size: int,
    env_kwargs: Mapping[str, Mapping[str, Any]],
    seed: int,
    backend: str = "subprocess",
) -> Any:
    """The training ``MultiTaskVectorEnv``: Ray env workers when ``ray.address`` is set."""
    from agentgym_eppo.vector import MultiTaskVectorEnv

    options: dict[str, Any] = {}
    if scale.ray.address is not None:
        backend = "ray"
        options = {"actor_options": {"num_cpus": scale.ray.env_worker_cpus}}
    return MultiTaskVectorEnv(
        dict(tasks),
        group_size=group_size,
        split="train",
        env_kwargs=env_kwargs,
        backend=backend,
        seed=seed,
        envs_per_worker=scale.ray.envs_per_worker,
        backend_options=options,
    )


def close_engine(engine: RolloutEngine | None, stop_ray: bool = False) -> None:
    """Stop what ``make_rollout_engine`` started (actors, an in-process SGLang; none when
    it failed) and the Ray runtime when this process started it."""
    for part in (engine, getattr(engine, "fresh", None), getattr(engine, "stale", None)):
        for name in ("close", "shutdown"):
            stop = getattr(part, name, None)
            if callable(stop):
                stop()
    if stop_ray:
        import ray

        ray.shutdown()
