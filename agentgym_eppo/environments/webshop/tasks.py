"""WebShop task records (one instruction and its goal) and the loader of task sets.

A task set comes from the shipped goals (``assets/webshop/goals_<split>.jsonl.gz``,
written by :mod:`.generator`), from a file or a list of rows in the same format, or
from the original WebShop files (:mod:`.original`). A row is WebShop's goal dict:
``asin``, ``instruction_text``, ``attributes``, ``goal_options`` (a dict group ->
value, or a list of values), ``price_upper``, ``query``, ``category``,
``product_category``, ``name``; plus ``sample_id`` and, optionally, ``search_query``
(the expert's keywords; the product title when absent).
"""

from __future__ import annotations

import os
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agentgym_eppo.core import TaskFormatError, TaskRecord, TaskSet, asset_path, read_json_or_jsonl

from .reward import Goal

PRICE_STEPS = [10.0 * i for i in range(1, 100)]
"""WebShop's ``PRICE_RANGE``: price caps are multiples of ten."""
_REQUIRED = ("asin", "instruction_text", "attributes", "goal_options", "price_upper")


@dataclass(frozen=True)
class WebShopRecord(TaskRecord):
    """One WebShop episode: the instruction's goal and the expert's search keywords."""

    goal: Goal
    search_query: str

    @property
    def instruction(self) -> str:
        return self.goal.instruction_text

    @classmethod
    def from_row(cls, row: Mapping[str, Any], *, default_id: str) -> WebShopRecord:
        """Build a record from a goal row; a missing or malformed field is a ``TaskFormatError``."""
        if not isinstance(row, Mapping):
            raise TaskFormatError(f"{default_id}: a WebShop goal must be an object, got {row!r}")
        missing = [key for key in _REQUIRED if key not in row]
        if missing:
            raise TaskFormatError(f"{default_id}: missing field(s) {', '.join(missing)}")
        options = row["goal_options"]
        values = list(options.values()) if isinstance(options, Mapping) else list(options)
        try:
            goal = Goal(
                asin=str(row["asin"]).upper(),
                instruction_text=str(row["instruction_text"]),
                attributes=tuple(str(a) for a in row["attributes"]),
                options=tuple(str(v) for v in values),
                price_upper=float(row["price_upper"]),
                query=str(row.get("query", "")),
                category=str(row.get("category", "")),
                product_category=str(row.get("product_category", "")),
                name=str(row.get("name", "")),
            )
        except (TypeError, ValueError) as error:
            raise TaskFormatError(f"{default_id}: malformed goal ({error})") from error
        return cls(
            sample_id=str(row.get("sample_id", default_id)),
            goal=goal,
            search_query=str(row.get("search_query") or goal.name.lower()),
        )


def records_from_rows(rows: Sequence[Any], *, name: str) -> TaskSet[WebShopRecord]:
    records = []
    for position, row in enumerate(rows):
        if isinstance(row, WebShopRecord):
            records.append(row)
        else:
            records.append(WebShopRecord.from_row(row, default_id=f"webshop-{position}"))
    return TaskSet(records, name=name)


def shipped_goals_path(split: str) -> str:
    return str(asset_path("webshop", f"goals_{split}.jsonl.gz"))


def load_goal_set(tasks: str | Sequence[Any] | None, split: str) -> TaskSet[WebShopRecord]:
    """The shipped ``split`` (``tasks=None``), a goal file, or a list of rows/records."""
    if tasks is None:
        path = shipped_goals_path(split)
        return records_from_rows(read_json_or_jsonl(path), name=f"webshop {split}")
    if isinstance(tasks, (str, os.PathLike)):
        return records_from_rows(read_json_or_jsonl(tasks), name=str(tasks))
    return records_from_rows(list(tasks), name="webshop tasks")


def price_cap(rng: random.Random, price: float) -> float | None:
    """WebShop's cap: the larger of two of the next four multiples of ten above ``price``."""
    steps = [step for step in PRICE_STEPS if step > price][:4]
    if len(steps) < 2:
        return None
    return max(rng.sample(steps, 2))
