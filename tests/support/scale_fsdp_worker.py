"""One policy update on a fixed batch, single-process or as an FSDP2 rank (torchrun).

From ``tests/`` (as ``test_scale_fsdp.py`` runs it), ``python support/scale_fsdp_worker.py
OUT single`` runs the trainer's own :class:`PolicyUpdater`; ``torchrun --nproc_per_node 2
support/scale_fsdp_worker.py OUT fsdp`` runs :class:`FSDPPolicyUpdater` (actor fp32 with gradient checkpointing, reference
bf16); both come from ``make_policy_updater`` and the ``fsdp`` config section. Both use SGD with lr 1 and no gradient clipping, so ``initial - updated``
parameters are exactly the gradients. Rank 0 (or the single process) saves the loss,
the update's statistics and those gradients to OUT.
"""

from __future__ import annotations

import copy
import sys

import torch

from agentgym_eppo.trainer.algorithms.clip_policies import FixedClip
from agentgym_eppo.trainer.distributed.config import FSDPConfig, ScaleConfig
from agentgym_eppo.trainer.distributed.launch import make_policy_updater
from agentgym_eppo.trainer.rollout.chat import Transcript
from agentgym_eppo.trainer.rollout.episodes import Episode
from agentgym_eppo.trainer.training.models import build_tiny_model, build_tokenizer
from agentgym_eppo.trainer.training.update import UpdateSettings

SETTINGS = UpdateSettings(
    kl_coef=0.05,
    temperature=0.8,
    micro_batch_tokens=48,
    mini_batches=2,
    max_grad_norm=1e9,
    logprob_chunk=7,
)


def batch() -> list[Episode]:
    """Eleven episodes of two tasks and uneven lengths (ranks get unequal micro-batch counts)."""
    episodes = []
    for k in range(11):
        task = "echo" if k % 3 else "lookup"
        length = 6 + (k * 5) % 17
        tokens = [(7 * k + 3 * j) % 300 + 3 for j in range(length)]
        mask = [0] * 3 + [1 if (j % 4) else 0 for j in range(length - 3)]
        episodes.append(
            Episode(
                k, task, f"{task}:{k // 2}", "s", Transcript(tokens, mask), reward=(k * 7 % 5) / 4
            )
        )
    return episodes


def model_and_reference():
    torch.manual_seed(0)
    tokenizer = build_tokenizer(["Say apple. Call say with the word."] * 20, vocab_size=320)
    model = build_tiny_model(tokenizer, hidden_size=32, layers=2, heads=2, kv_heads=1, seed=0)
    with torch.no_grad():  # the reference differs from the actor, so the KL term matters
        reference = copy.deepcopy(model)
        for parameter in reference.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.02)
    return model, reference.to(torch.bfloat16)


def main(out: str, mode: str) -> None:
    torch.set_num_threads(1)
    model, reference = model_and_reference()
    initial = {name: p.detach().clone() for name, p in model.named_parameters()}
    generator = torch.Generator().manual_seed(0)
    scale = ScaleConfig(fsdp=FSDPConfig(enabled=mode != "single", backend="gloo"))
    updater = make_policy_updater(
        scale, model, reference, FixedClip(), SETTINGS, 0, lambda ps: torch.optim.SGD(ps, lr=1.0)
    )
    result = updater.step(batch(), generator)
    if mode == "single":
        updated = {name: p.detach() for name, p in model.named_parameters()}
        _save(out, result, initial, updated)
        return
    import torch.distributed as dist

    from agentgym_eppo.trainer.distributed.fsdp import (
        FSDPPolicyUpdater,
        full_state_dict,
        leave_distributed,
    )

    assert isinstance(updater, FSDPPolicyUpdater)
    state = full_state_dict(updater.scorer)
    updated = {name: state[f"model.{name}"] for name in initial}
    if dist.get_rank() == 0:
        _save(out, result, initial, updated)
    leave_distributed()  # a Ray rank (tests/test_scale_ray.py) returns here


def _save(out: str, result, initial: dict, updated: dict) -> None:
    torch.save(
        {
            "loss": result.loss,
            "kl": result.kl,
            "grad_norm": result.grad_norm,
            "tokens": result.tokens,
            "task_entropy": result.task_entropy,
            "task_ratio_outside_share": result.task_ratio_outside_share,
            "task_clipped_share": result.task_clipped_share,
            "advantages": result.advantages,
            "gradients": {name: initial[name] - updated[name] for name in initial},
        },
        out,
    )


if __name__ == "__main__":
    from agentgym_eppo.trainer.distributed.fsdp import exit_distributed

    main(sys.argv[1], sys.argv[2])
    exit_distributed()  # a torchrun rank: no interpreter teardown (see its docstring)
