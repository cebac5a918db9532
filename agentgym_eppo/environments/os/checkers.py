"""The standard checkers of AgentBench's OS tasks, as the project's own functions.

AgentBench ships them as ``check/<name>.py`` scripts run in the container with
``[answer, outputs...]`` as arguments; exit code 0 passes. Here they run in-process on
the same arguments, and any file reference whose name is one of :data:`STANDARD_CHECKERS`
resolves to them. Behaviour matches AgentBench's scripts, with one repair:
``size-match`` accepts decimal sizes (``8.0K`` as ``du -h`` prints below 10), which the
original's ``int()`` rejects, so its own example answers failed.

Every check here compares what the agent produced as data. AgentBench's scripts that
paste it into code instead are recognised by their text (:data:`REPLACED_SCRIPTS`) and
swapped for the project's version of each (:func:`replacement`).
"""

from __future__ import annotations

import hashlib
import re
import shlex
from collections.abc import Callable, Sequence

Checker = Callable[[Sequence[str]], bool]

_SIZE_UNITS = {
    "": 1, "B": 1, "BYTE": 1, "BYTES": 1,
    "K": 1 << 10, "KB": 1 << 10, "KIB": 1 << 10,
    "M": 1 << 20, "MB": 1 << 20, "MIB": 1 << 20,
    "G": 1 << 30, "GB": 1 << 30, "GIB": 1 << 30,
    "T": 1 << 40, "TB": 1 << 40, "TIB": 1 << 40,
    "P": 1 << 50, "PB": 1 << 50, "PIB": 1 << 50,
}  # fmt: skip
_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*$")


def _normalise_newlines(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n").strip()


def integer_match(args: Sequence[str]) -> bool:
    """``int(answer) == int(expected)``; anything that is not an integer fails."""
    try:
        return int(args[0]) == int(args[1])
    except (ValueError, IndexError):
        return False


def string_match(args: Sequence[str]) -> bool:
    """Equal after normalising newlines and stripping surrounding whitespace."""
    return len(args) >= 2 and _normalise_newlines(args[0]) == _normalise_newlines(args[1])


def containing(args: Sequence[str]) -> bool:
    """The expected text occurs in the answer."""
    return len(args) >= 2 and _normalise_newlines(args[1]) in _normalise_newlines(args[0])


def is_in(args: Sequence[str]) -> bool:
    """The answer occurs in the expected text (e.g. one line of a list of valid answers)."""
    return len(args) >= 2 and _normalise_newlines(args[0]) in _normalise_newlines(args[1])


def parse_size(text: str) -> float:
    """``"8.0K"`` -> 8192.0 (binary units, as ``du -h`` and ``ls -h`` print them)."""
    match = _SIZE.match(text)
    if not match or match.group(2).upper() not in _SIZE_UNITS:
        raise ValueError(f"not a size: {text!r}")
    return float(match.group(1)) * _SIZE_UNITS[match.group(2).upper()]


def size_match(args: Sequence[str]) -> bool:
    """Equal sizes, whatever the unit (``1.5K`` == ``1536``)."""
    try:
        return parse_size(args[0]) == parse_size(args[1])
    except (ValueError, IndexError):
        return False


STANDARD_CHECKERS: dict[str, Checker] = {
    "integer-match": integer_match,
    "string-match": string_match,
    "size-match": size_match,
    "containing": containing,
    "in": is_in,
}
"""AgentBench's ``check/<name>.py`` scripts by name (without directory and extension)."""


CALC_CASES = (
    ("15 + (27 * 4) - 10", "113.000000"),
    ("8 * (14 - 6) + 12", "76.000000"),
    ("3 + (6.7 * 9) - 5.5", "57.800000"),
    ("20 / (5 + 2) - 1", "1.857143"),
    ("9 * (16 / 8) + 3", "21.000000"),
    ("25 - (8 * 3) + 2", "3.000000"),
    ("14 + (25.6 / 2) - 5.2", "21.600000"),
    ("18 / (6 - 2) + 9", "13.500000"),
    ("17 + (18.2 / 2) - 2.8", "23.300000"),
    ("36 / (6 - 3) + 10", "22.000000"),
    ("5 + (10 * 4) - 8", "37.000000"),
    ("50 / (5 + 2) - 6", "1.142857"),
    ("8 * (16 / 4) + 9", "41.000000"),
    ("21 - (9 * 2) + 4", "7.000000"),
)
"""AgentBench's ``check/0.sh`` (dev tasks 3 and 5, the ``calc`` program): each expression
and its value as that script computes it (``"%.6f"``)."""

_NUMBERS_CLOSE = (
    "import sys\n"
    "try:\n"
    "    close = abs(float(sys.argv[1]) - float(sys.argv[2])) < 1e-5\n"
    "except ValueError:\n"
    "    close = False\n"
    "sys.exit(0 if close else 1)\n"
)


def calc_check() -> str:
    """``check/0.sh`` comparing as data: ``calc``'s output is an argument of the
    comparison. The original ran ``python3 -c "print(abs($output - $expected)<1e-5)"``,
    so a ``calc`` that printed ``0)<1e-5 or (True`` passed every line.

    >>> "abs($output" in calc_check(), '"$(calc ' in calc_check()
    (False, True)
    """
    lines = ["#!/bin/bash", "close() { python3 -I -c " + shlex.quote(_NUMBERS_CLOSE) + ' "$@"; }']
    for expression, value in CALC_CASES:
        lines.append(f'close "$(calc {shlex.quote(expression)})" {value} || exit 1')
    lines.append("exit 0")
    return "\n".join(lines) + "\n"


REPLACED_SCRIPTS: dict[str, Callable[[], str]] = {
    "bc75b2778c644ec42abb46abec6eadf52812f10c02255a1c3b2b55c3ced0ae0c": calc_check,
}
"""AgentBench scripts that run the agent's text as code, by the SHA-256 of their text,
and the project's version of each."""


def replacement(text: str) -> str | None:
    """The project's version of an AgentBench script that pastes the agent's output into
    code, or None for any other script (it runs as written)."""
    make = REPLACED_SCRIPTS.get(hashlib.sha256(text.encode("utf-8")).hexdigest())
    return make() if make is not None else None
