"""Which task instance each group of slots plays next: AgentRL's multi-task sampling.

AgentRL (and the EPPO paper) sample tasks uniformly by shuffling each task's dataset,
repeating the smaller datasets until every task is as long as the largest, and
interleaving the tasks round-robin. :func:`interleaved_schedule` builds exactly that
list (the TRL dataset builder ships it as a dataset). The vector env binds each slot
to one task, so the interleaving there is the slot layout (groups of different tasks
alternate) and each task draws its instances from its own :class:`InstanceStream`:
shuffled passes over the dataset, reshuffled every pass, so that a small dataset
repeats and every instance is played once per pass.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping

import numpy as np


def _task_seed(seed: int, task_id: str) -> list[int]:
    """A seed per (run seed, task) that does not depend on Python's string hashing."""
    return [int(seed) & 0xFFFFFFFF, zlib.crc32(task_id.encode("utf-8"))]


class InstanceStream:
    """An endless sequence of instance indices of one task: shuffled passes, cycled."""

    def __init__(self, task_id: str, num_instances: int, seed: int = 0) -> None:
        if num_instances < 1:
            raise ValueError(f"task {task_id!r} has no instances to sample")
        self.task_id = task_id
        self.num_instances = int(num_instances)
        self._rng = np.random.default_rng(_task_seed(seed, task_id))
        self._pass: list[int] = []
        self.drawn = 0
        """How many instances have been drawn so far (the draw counter of group keys)."""

    def next(self) -> int:
        """The next instance index; a new shuffled pass starts when one is used up."""
        if not self._pass:
            self._pass = [int(i) for i in self._rng.permutation(self.num_instances)][::-1]
        self.drawn += 1
        return self._pass.pop()


def interleaved_schedule(
    sizes: Mapping[str, int], seed: int = 0, *, length: int | None = None
) -> list[tuple[str, int]]:
    """AgentRL's multi-task order: ``(task_id, instance index)`` pairs, tasks round-robin.

    Each task contributes ``max(sizes.values())`` draws (smaller datasets repeat, each
    pass shuffled) unless ``length`` says how many draws per task. Tasks alternate in the
    order of ``sizes``. The result is uniform over tasks whatever their dataset sizes.

    >>> interleaved_schedule({"db": 1, "kg": 2}, seed=0)[:2]
    [('db', 0), ('kg', 1)]
    """
    if not sizes:
        raise ValueError("interleaved_schedule needs at least one task")
    per_task = max(sizes.values()) if length is None else int(length)
    streams = [InstanceStream(task, size, seed) for task, size in sizes.items()]
    return [(stream.task_id, stream.next()) for _ in range(per_task) for stream in streams]
