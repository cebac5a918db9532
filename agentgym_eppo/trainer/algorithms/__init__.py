"""The RL algorithm: advantages, the token-level loss, the EPPO pacer and the clip policies.

Needs only torch (``tests/test_trainer_layout.py`` checks that importing this package
loads no transformers, Ray or SGLang), so the algorithm can be read, tested and reused
without the rest of the trainer.
"""

from .advantages import grpo_advantages, normalize_by_task, rloo_advantages
from .clip_policies import BAPOClip, ClipPolicy, ClipTokens, DAPOClip, DCPOClip, EPPOClip, FixedClip
from .losses import TokenLosses, clipped_policy_loss, k3_kl, token_losses, token_sum
from .pacer import EPPOPacer, TaskPace

__all__ = [
    "BAPOClip",
    "ClipPolicy",
    "ClipTokens",
    "DAPOClip",
    "DCPOClip",
    "EPPOClip",
    "EPPOPacer",
    "FixedClip",
    "TaskPace",
    "TokenLosses",
    "clipped_policy_loss",
    "grpo_advantages",
    "k3_kl",
    "normalize_by_task",
    "rloo_advantages",
    "token_losses",
    "token_sum",
]
