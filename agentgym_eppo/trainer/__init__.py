"""GRPO/RLOO with the EPPO pacer: one room per job (the layout table is in docs/trainer.md).

``algorithms`` needs only torch; the other rooms need the ``train`` extra (transformers,
rich). The names below are the public entry points; each is imported only when asked
for, so ``import agentgym_eppo.trainer`` stays light.
"""

from __future__ import annotations

import importlib
from typing import Any

_PUBLIC = {
    "EPPOPacer": "agentgym_eppo.trainer.algorithms.pacer",
    "ClipPolicy": "agentgym_eppo.trainer.algorithms.clip_policies",
    "FixedClip": "agentgym_eppo.trainer.algorithms.clip_policies",
    "EPPOClip": "agentgym_eppo.trainer.algorithms.clip_policies",
    "DAPOClip": "agentgym_eppo.trainer.algorithms.clip_policies",
    "DCPOClip": "agentgym_eppo.trainer.algorithms.clip_policies",
    "BAPOClip": "agentgym_eppo.trainer.algorithms.clip_policies",
    "ClipTokens": "agentgym_eppo.trainer.algorithms.clip_policies",
    "register_clip_policy": "agentgym_eppo.trainer.algorithms.clip_policies",
    "register_advantage_estimator": "agentgym_eppo.trainer.algorithms.advantages",
    "TrainConfig": "agentgym_eppo.trainer.config",
    "load_config": "agentgym_eppo.trainer.config",
    "run_training": "agentgym_eppo.trainer.run",
    "evaluate_policy": "agentgym_eppo.trainer.rollout.evaluation",
    "evaluate_endpoint": "agentgym_eppo.trainer.rollout.openai_endpoint",
    "diagnose_run": "agentgym_eppo.trainer.analysis.report",
    "run_compare": "agentgym_eppo.trainer.compare",
}

__all__ = sorted(_PUBLIC)


def __getattr__(name: str) -> Any:
    # Lazy: run_training pulls in transformers, diagnose_run matplotlib.
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
