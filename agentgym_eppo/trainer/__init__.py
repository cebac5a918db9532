"""GRPO/RLOO with the EPPO pacer: advantages, losses, clip policies, rollouts, CLI.

The algorithm modules (``pacer``, ``advantages``, ``losses``, ``clip_policies``) need
only torch; the rest of the trainer needs the ``train`` extra (transformers, rich).
"""

from .pacer import EPPOPacer

__all__ = ["EPPOPacer", "run_training"]


def __getattr__(name: str) -> object:
    # run_training pulls in transformers; import it only when asked for.
    if name == "run_training":
        from .run import run_training

        return run_training
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
