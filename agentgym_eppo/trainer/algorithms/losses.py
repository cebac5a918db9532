"""The token-level policy loss: clipped ratio (eq. 3/12), dual clip, k3 KL, entropy bonus.

Everything here works on flat tensors over the *loss tokens* of a batch (the tokens
the model generated; environment and template tokens never enter), so a micro-batch
is just a slice. The batch loss is the token mean (appendix A.2: "token-mean
reduction"): each micro-batch sums its token losses and divides by the number of loss
tokens in the whole batch, so gradient accumulation gives the same gradient as one pass.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.nn import functional as F
from torch.utils.checkpoint import checkpoint

from .defaults import DUAL_CLIP_C, ENTROPY_COEF, KL_COEF, LOGPROB_CHUNK


def _chunk_logprobs_entropy(
    hidden: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor, temperature: float
) -> tuple[torch.Tensor, torch.Tensor]:
    logits = (hidden @ weight.T).float() / temperature
    log_probs = F.log_softmax(logits, dim=-1)
    chosen = log_probs.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    entropy = -(log_probs.exp() * log_probs).sum(-1)  # eq. 5: entropy of the full distribution
    return chosen, entropy


def chunked_logprobs_and_entropy(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    targets: torch.Tensor,
    temperature: float = 1.0,
    chunk_size: int = LOGPROB_CHUNK,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Log-probability of ``targets`` and entropy per position, ``chunk_size`` rows at a time.

    ``hidden``: ``[N, D]`` final hidden states of the positions that predict
    ``targets`` (``[N]``); ``weight``: the ``[V, D]`` output embedding. Only one chunk's
    ``[chunk, V]`` logits exist at a time, also in the backward pass (each chunk is
    recomputed under activation checkpointing when gradients are on): a 150k
    vocabulary would otherwise need GBs for a long batch (2 x 8,192 positions x 150k
    x 4 bytes = 10 GB of logits and their gradient). Logits are divided
    by the sampling ``temperature`` so the ratio compares the distributions the
    rollouts were sampled from.
    """
    if hidden.dim() != 2 or targets.shape != hidden.shape[:1]:
        raise ValueError(
            f"hidden must be [N, D] and targets [N]; got {tuple(hidden.shape)} and "
            f"{tuple(targets.shape)}"
        )
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    logprobs, entropies = [], []
    needs_grad = torch.is_grad_enabled() and (hidden.requires_grad or weight.requires_grad)
    for start in range(0, hidden.shape[0], chunk_size):
        rows = slice(start, start + chunk_size)
        if needs_grad:
            chosen, entropy = checkpoint(
                _chunk_logprobs_entropy,
                hidden[rows],
                weight,
                targets[rows],
                temperature,
                use_reentrant=False,
            )
        else:
            chosen, entropy = _chunk_logprobs_entropy(
                hidden[rows], weight, targets[rows], temperature
            )
        logprobs.append(chosen)
        entropies.append(entropy)
    if not logprobs:
        empty = hidden.new_zeros(0, dtype=torch.float32)
        return empty, empty
    return torch.cat(logprobs), torch.cat(entropies)


@dataclass
class TokenLosses:
    """Per-token pieces of the loss; reduce them with :func:`token_sum`."""

    policy: torch.Tensor  # clipped surrogate, to minimise
    kl: torch.Tensor  # k3 estimate of KL(pi_theta || pi_ref); zeros without a reference
    entropy: torch.Tensor
    ratio: torch.Tensor  # detached importance ratio
    outside: torch.Tensor  # bool: the ratio lies outside this token's [lower, upper]
    clipped: torch.Tensor  # bool: the clip (a bound or the dual clip) cut this token's gradient


def clipped_policy_loss(
    ratio: torch.Tensor,
    advantages: torch.Tensor,
    lower: torch.Tensor | float,
    upper: torch.Tensor | float,
    dual_clip_c: float | None = DUAL_CLIP_C,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Eq. 3/12 per token with ratio bounds ``[lower, upper]`` and PPO's dual clip.

    ``ratio`` is the importance ratio ``pi_theta / pi_old`` (with its gradient).
    ``loss = max(-A r, -A clip(r, lower, upper))``; for ``A < 0`` the dual clip caps it
    at ``-A c`` (so a huge ratio on a bad token cannot blow up the step). Returns the
    per-token loss and a bool mask of the tokens whose gradient the clip removed.
    Fixed GRPO uses ``lower = 1 - ε``, ``upper = 1 + ε``; the clip policies supply
    per-task or per-token bounds.

    >>> ratio = torch.tensor([1.0, 1.5, 0.5])
    >>> loss, clipped = clipped_policy_loss(ratio, torch.tensor([1.0, 1.0, -1.0]), 0.75, 1.25)
    >>> loss.tolist(), clipped.tolist()
    ([-1.0, -1.25, 0.75], [False, True, True])
    """
    if dual_clip_c is not None and dual_clip_c <= 1:
        raise ValueError(f"the dual clip constant must be > 1, got {dual_clip_c}")
    lower = torch.as_tensor(lower, dtype=ratio.dtype)
    upper = torch.as_tensor(upper, dtype=ratio.dtype)
    unclipped = -advantages * ratio
    bounded = -advantages * torch.minimum(torch.maximum(ratio, lower), upper)
    loss = torch.maximum(unclipped, bounded)
    clipped = bounded > unclipped
    if dual_clip_c is not None:
        cap = -advantages * dual_clip_c
        dual = (advantages < 0) & (loss > cap)
        loss = torch.where(dual, cap, loss)
        clipped = clipped | dual
    return loss, clipped


def k3_kl(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """Schulman's k3 estimator of KL(pi || pi_ref): ``exp(d) - d - 1`` with ``d = ref - logp``.

    Unbiased, always >= 0, and 0 exactly where the two log-probabilities agree.
    """
    delta = ref_logprobs - logprobs
    return torch.exp(delta) - delta - 1


def token_losses(
    ratio: torch.Tensor,
    logprobs: torch.Tensor,
    entropy: torch.Tensor,
    advantages: torch.Tensor,
    lower: torch.Tensor | float,
    upper: torch.Tensor | float,
    ref_logprobs: torch.Tensor | None = None,
    dual_clip_c: float | None = DUAL_CLIP_C,
) -> TokenLosses:
    """All per-token terms of the objective for flat tensors of loss tokens.

    ``ratio`` is ``exp(logprobs - old_logprobs)``, computed once by the caller (the clip
    policy needed its detached value for the bounds already).
    """
    policy, clipped = clipped_policy_loss(ratio, advantages, lower, upper, dual_clip_c)
    kl = torch.zeros_like(logprobs) if ref_logprobs is None else k3_kl(logprobs, ref_logprobs)
    detached = ratio.detach()
    outside = (detached < torch.as_tensor(lower, dtype=detached.dtype)) | (
        detached > torch.as_tensor(upper, dtype=detached.dtype)
    )
    return TokenLosses(
        policy=policy, kl=kl, entropy=entropy, ratio=detached, outside=outside, clipped=clipped
    )


def token_sum(
    terms: TokenLosses,
    batch_tokens: int,
    kl_coef: float = KL_COEF,
    entropy_coef: float = ENTROPY_COEF,
) -> torch.Tensor:
    """This micro-batch's share of the batch's token-mean loss.

    ``sum(policy + kl_coef * kl - entropy_coef * entropy) / batch_tokens``, where
    ``batch_tokens`` counts the loss tokens of the whole batch (all micro-batches).
    """
    if batch_tokens < 1:
        raise ValueError(f"batch_tokens must be >= 1, got {batch_tokens}")
    total = terms.policy + kl_coef * terms.kl - entropy_coef * terms.entropy
    return total.sum() / batch_tokens
