"""DBBench scoring: AgentBench's answer comparison and its table hash, computed in Python.

Query tasks compare the committed answers with the label after AgentBench's
normalisation (``None``/``null``/``nan``/``inf``/empty -> ``"0"``, a trailing ``%`` and
thousands commas dropped): one value against one compares as floats within 1e-2 when
both parse, else as strings; several values are matched one-to-one as floats when all
parse, else compared as sets.

INSERT/UPDATE/DELETE tasks ignore the answer and hash the tables. AgentBench asks MySQL
for ``md5(group_concat(substr(md5(concat_ws(',', cols...)), 1, 5) order by ...))`` per
table and joins the sorted table hashes with ``_``. :func:`table_hash` reproduces that
from the rows themselves, so every backend scores alike: ``concat_ws`` skips NULLs,
``group_concat`` joins with ``,`` and cuts its result at ``group_concat_max_len``
(MySQL's default, 1024, is what AgentBench's MySQL container uses), and a table with no
rows hashes as MySQL's ``md5(NULL)``, which is NULL (the text ``None`` here, as the
AgentBench client prints it).
"""

from __future__ import annotations

import ast
import hashlib
import math
from collections.abc import Iterable, Sequence
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

MUTATION_TYPES = ("INSERT", "UPDATE", "DELETE")
FLOAT_TOLERANCE = 1e-2
MYSQL_GROUP_CONCAT_MAX_LEN = 1024
_SPECIAL_VALUES = {"none", "null", "undefined", "nan", "inf", "infinity", "-inf", "-infinity", ""}


def sql_text(value: Any) -> str | None:
    """A column value as MySQL's ``CONCAT`` would spell it (``None`` stays ``None``)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float):
        return repr(int(value)) if value.is_integer() and abs(value) < 1e15 else repr(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("utf-8", errors="replace")
    if isinstance(value, (datetime, date, time)):
        return value.isoformat(sep=" ") if isinstance(value, datetime) else value.isoformat()
    if isinstance(value, timedelta):
        return str(value)
    return str(value)


def row_hash(row: Sequence[Any]) -> str:
    """``substr(md5(concat_ws(',', row...)), 1, 5)``: NULLs are skipped, as ``concat_ws`` does."""
    joined = ",".join(text for text in map(sql_text, row) if text is not None)
    return hashlib.md5(joined.encode("utf-8")).hexdigest()[:5]


def table_hash(
    rows: Iterable[Sequence[Any]], group_concat_max_len: int = MYSQL_GROUP_CONCAT_MAX_LEN
) -> str:
    """MySQL's ``md5(group_concat(rowhash order by rowhash))`` over ``rows``."""
    hashes = sorted(row_hash(row) for row in rows)
    if not hashes:
        return "None"
    concatenated = ",".join(hashes)[:group_concat_max_len]
    return hashlib.md5(concatenated.encode("utf-8")).hexdigest()


def tables_hash(
    table_rows: Iterable[Iterable[Sequence[Any]]],
    group_concat_max_len: int = MYSQL_GROUP_CONCAT_MAX_LEN,
) -> str:
    """The hashes of several tables, sorted and joined by ``_`` (AgentBench's combination)."""
    return "_".join(sorted(table_hash(rows, group_concat_max_len) for rows in table_rows))


def expected_md5(answer_md5: str) -> str:
    """The hash out of AgentBench's ``answer_md5`` field, e.g. ``"[('43a5...',)]"``."""
    values = clean_answer(answer_md5)
    return "_".join(values) if values else ""


def normalize_value(value: Any) -> str:
    """One answer value after AgentBench's normalisation (see the module docstring)."""
    if value is None:
        return "0"
    text = str(value).strip()
    if text.endswith("%"):
        return text[:-1].strip()
    if "," in text and not (text.startswith("[") or text.endswith("]")):
        text = text.replace(",", "")
    return "0" if text.lower() in _SPECIAL_VALUES else text


def clean_answer(answer: Any) -> list[str]:
    """An answer (a list, a MySQL result string ``"[('a',), ('b',)]"`` or one value) as a
    list of normalised strings. Literal lists are read with ``ast.literal_eval``, never
    ``eval``."""
    if answer is None:
        return ["0"]
    if isinstance(answer, str):
        text = answer.strip()
        if text.startswith("[") and text.endswith("]"):
            try:
                parsed = ast.literal_eval(text)
            except (ValueError, SyntaxError, MemoryError, RecursionError):
                return [normalize_value(item) for item in _split_list_text(text[1:-1])]
            if isinstance(parsed, (list, tuple)):
                return clean_answer(list(parsed))
        return [normalize_value(text.strip("'\""))]
    if isinstance(answer, (list, tuple)):
        values = []
        for item in answer:
            if isinstance(item, tuple) and len(item) == 1:
                item = item[0]
            values.append(normalize_value(str(item).strip().strip("'\"")))
        return values
    return [normalize_value(str(answer).strip().strip("'\""))]


def _split_list_text(body: str) -> list[str]:
    """Split ``a, 'b, c', d`` on commas outside quotes (AgentBench's fallback parser)."""
    items: list[str] = []
    current = ""
    in_quotes = False
    for char in body:
        if char in "\"'":
            in_quotes = not in_quotes
        elif char == "," and not in_quotes:
            if current:
                items.append(current.strip().strip("'\""))
            current = ""
        else:
            current += char
    if current:
        items.append(current.strip().strip("'\""))
    return items


def _as_float(text: str) -> float | None:
    try:
        number = float(text)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def _floats_equal(a: float, b: float) -> bool:
    return abs(a - b) <= FLOAT_TOLERANCE


def answers_match(answer: Any, label: Any) -> bool:
    """AgentBench's ``compare_results`` for query tasks (see the module docstring)."""
    given = clean_answer(answer)
    gold = clean_answer(label)
    if len(given) == 1 and len(gold) == 1:
        a, b = given[0], gold[0]
        fa, fb = _as_float(a), _as_float(b)
        if fa is not None and fb is not None:
            return _floats_equal(fa, fb)
        return a == b
    given_floats = [_as_float(item) for item in given]
    gold_floats = [_as_float(item) for item in gold]
    if all(f is not None for f in given_floats) and all(f is not None for f in gold_floats):
        if len(given) != len(gold):
            return False
        unmatched = [f for f in gold_floats if f is not None]
        for value in given_floats:
            assert value is not None
            position = next(
                (i for i, gold_value in enumerate(unmatched) if _floats_equal(value, gold_value)),
                None,
            )
            if position is None:
                return False
            unmatched.pop(position)
        return True
    return set(given) == set(gold)


def display_value(value: Any) -> Any:
    """A fetched value as a plain Python scalar, so observations read alike on every
    backend (``Decimal('2.50')`` -> ``2.5``, dates -> text)."""
    if isinstance(value, Decimal):
        if value.is_finite() and value == value.to_integral_value():
            return int(value)
        return float(value)
    if isinstance(value, (datetime, date, time, timedelta, bytes, bytearray, memoryview)):
        return sql_text(value)
    return value
