"""Fresh task instances for pretraining, with the dev and test splits held out.

Every task family's generator can draw new instances from a new seed (the module its
registration names, :attr:`~agentgym_eppo.registration.TaskSpec.generator`, which says
what such a module defines). This module is the one door to them:
:func:`fresh_tasks` draws, then drops every instance whose content hash matches a dev
or test instance of the shipped splits (and any repeat within the stream), so that a
model pretrained on the stream is evaluated on instances it never saw. Sample ids are
rewritten to ``<task>-fresh<seed>-<k>``.

>>> rows = fresh_tasks("kg", 3, seed=7)
>>> [row["qid"] for row in rows]
['kg-fresh7-0', 'kg-fresh7-1', 'kg-fresh7-2']
>>> any(content_hash("kg", row) in heldout_hashes("kg") for row in rows)
False
"""

from __future__ import annotations

import hashlib
import importlib
from collections.abc import Mapping
from functools import cache
from types import ModuleType
from typing import Any

from ..core import read_json_or_jsonl
from ..core.registry import did_you_mean
from ..registration import ENVIRONMENTS

HELDOUT_SPLITS = ("dev", "test")


def generators() -> dict[str, str]:
    """``info["task_id"]`` -> the module of its generator, for every registered task
    that has one."""
    return {task: spec.generator for task, spec in ENVIRONMENTS.items() if spec.generator}


def _source(task_id: str) -> ModuleType:
    known = generators()
    if task_id not in known:
        raise KeyError(
            f"no fresh-task generator for task {task_id!r}{did_you_mean(task_id, known)}; "
            f"known: {', '.join(known)}"
        )
    return importlib.import_module(known[task_id])


def content_hash(task_id: str, row: Mapping[str, Any]) -> str:
    """SHA-256 of what makes ``row`` the task it is (ids and names of files aside)."""
    return hashlib.sha256(_source(task_id).content_key(row).encode("utf-8")).hexdigest()


@cache
def heldout_hashes(task_id: str) -> frozenset[str]:
    """The content hashes of the shipped dev and test instances of ``task_id``."""
    _source(task_id)  # an unknown task, or one without a generator, fails here
    spec = ENVIRONMENTS[task_id]
    return frozenset(
        content_hash(task_id, row)
        for split in HELDOUT_SPLITS
        for row in read_json_or_jsonl(spec.task_file(split))
    )


def fresh_tasks(task_id: str, count: int, seed: int) -> list[dict[str, Any]]:
    """``count`` new instances of ``task_id`` drawn with ``seed``, none of them held out.

    Deterministic in ``(task_id, count, seed)``. Draws a little more than ``count`` so
    that the held-out matches (rare: the generators draw from large spaces) can be
    dropped.
    """
    if count <= 0:
        return []
    heldout = heldout_hashes(task_id)
    source = _source(task_id)
    kept: list[dict[str, Any]] = []
    seen: set[str] = set()
    extra = max(8, count // 20)
    while len(kept) < count:
        for row in source.fresh_tasks(count + extra, seed):
            digest = content_hash(task_id, row)
            if digest in heldout or digest in seen:
                continue
            seen.add(digest)
            kept.append(row)
        extra *= 4  # too many matches: draw again, more
        if len(kept) < count:
            kept, seen = [], set()
    id_field = getattr(source, "ID_FIELD", "sample_id")
    return [{**row, id_field: f"{task_id}-fresh{seed}-{k}"} for k, row in enumerate(kept[:count])]
