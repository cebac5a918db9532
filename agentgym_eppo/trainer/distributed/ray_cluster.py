"""Joining a Ray cluster, and ``ray.get`` that never waits forever.

``ray.address``: ``local`` starts a runtime in this process with ``num_cpus`` CPUs;
``auto`` joins the cluster this node belongs to (``ray start --head`` ran earlier, or
the job was submitted to it); ``ray://host:port`` reaches a remote head through Ray
Client. The vector env's Ray back-end
(:class:`agentgym_eppo.vector.workers.ray.RayPool`) starts no runtime of its own when
one is up, so the env workers land on the same cluster as the engines and ranks.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentgym_eppo.vector.workers.ray import start_local_ray

from .config import RayConfig


class RayCallTimeout(TimeoutError):
    """An actor did not answer within the configured bound (``ray.get_timeout_s``)."""


def connect(config: RayConfig) -> bool:
    """Connect to (or start) the Ray runtime ``config.address`` names.

    Returns True when this call started a runtime (the caller shuts it down) and False
    when one was already up or an existing cluster was joined.
    """
    import ray

    if config.address is None:
        raise ValueError("ray.address is None: the run is single-process, there is nothing to join")
    if ray.is_initialized():
        return False
    if config.address == "local":
        start_local_ray(config.num_cpus)
        return True
    ray.init(address=config.address, log_to_driver=False, configure_logging=False)
    return False


def get(refs: Any, timeout_s: float, what: str) -> Any:
    """``ray.get(refs)`` bounded by ``timeout_s``; a late answer is a :class:`RayCallTimeout`
    naming ``what`` (an actor waiting for CPUs that do not exist shows up here too)."""
    import ray

    try:
        return ray.get(refs, timeout=timeout_s)
    except ray.exceptions.GetTimeoutError as error:
        raise RayCallTimeout(
            f"{what} did not answer within {timeout_s:g}s (is the actor pending for lack of "
            "CPUs/GPUs? see `ray status`)"
        ) from error


def split_evenly(count: int, parts: int) -> list[range]:
    """``range(count)`` cut into ``parts`` contiguous pieces whose sizes differ by at most 1."""
    base, extra = divmod(count, parts)
    pieces, start = [], 0
    for part in range(parts):
        size = base + (1 if part < extra else 0)
        pieces.append(range(start, start + size))
        start += size
    return pieces


def gather_in_order(pieces: Sequence[range], answers: Sequence[Sequence[Any]]) -> list[Any]:
    """Undo :func:`split_evenly`: one list with every piece's answers in place."""
    out: list[Any] = [None] * sum(len(p) for p in pieces)
    for piece, answer in zip(pieces, answers, strict=True):
        if len(answer) != len(piece):
            raise ValueError(f"a piece of {len(piece)} came back with {len(answer)} answers")
        for index, value in zip(piece, answer, strict=True):
            out[index] = value
    return out
