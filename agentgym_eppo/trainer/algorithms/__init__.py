"""The RL algorithm: advantages, the token-level loss, the EPPO pacer and the clip policies.

Needs only torch (``tests/test_trainer_layout.py`` checks that importing this package
loads no transformers, Ray or SGLang), so the algorithm can be read, tested and reused
without the rest of the trainer. :func:`register_clip_policy` and
:func:`register_advantage_estimator` add a clip policy or an advantage estimator from
user code; a config then names it like a built-in one.
"""

from .advantages import (
    ADVANTAGE_ESTIMATORS,
    grpo_advantages,
    normalize_by_task,
    register_advantage_estimator,
    rloo_advantages,
)
from .clip_policies import (
    CLIP_POLICIES,
    BAPOClip,
    ClipPolicy,
    ClipTokens,
    DAPOClip,
    DCPOClip,
    EPPOClip,
    FixedClip,
    make_clip_policy,
    register_clip_policy,
)
from .losses import TokenLosses, clipped_policy_loss, k3_kl, token_losses, token_sum
from .pacer import EPPOPacer, PacerParams, TaskPace, TaskPacing

__all__ = [
    "ADVANTAGE_ESTIMATORS",
    "CLIP_POLICIES",
    "BAPOClip",
    "ClipPolicy",
    "ClipTokens",
    "DAPOClip",
    "DCPOClip",
    "EPPOClip",
    "EPPOPacer",
    "FixedClip",
    "PacerParams",
    "TaskPace",
    "TaskPacing",
    "TokenLosses",
    "clipped_policy_loss",
    "grpo_advantages",
    "k3_kl",
    "make_clip_policy",
    "normalize_by_task",
    "register_advantage_estimator",
    "register_clip_policy",
    "rloo_advantages",
    "token_losses",
    "token_sum",
]
