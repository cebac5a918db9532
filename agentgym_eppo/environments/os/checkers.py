"""The standard checkers of AgentBench's OS tasks, as the project's own functions.

AgentBench ships them as ``check/<name>.py`` scripts run in the container with
``[answer, outputs...]`` as arguments; exit code 0 passes. Here they run in-process on
the same arguments, and any file reference whose name is one of :data:`STANDARD_CHECKERS`
resolves to them. Behaviour matches AgentBench's scripts, with one repair:
``size-match`` accepts decimal sizes (``8.0K`` as ``du -h`` prints below 10), which the
original's ``int()`` rejects, so its own example answers failed.
"""

from __future__ import annotations

import re
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
