"""The standard checkers keep AgentBench's semantics (arguments: answer, expected)."""

from __future__ import annotations

import pytest

from agentgym_eppo.environments.os.checkers import STANDARD_CHECKERS, parse_size


@pytest.mark.parametrize(
    ("name", "answer", "expected", "passes"),
    [
        ("integer-match", "6", "6\n", True),
        ("integer-match", " 06 ", "6", True),
        ("integer-match", "6.0", "6", False),
        ("integer-match", "six", "6", False),
        ("string-match", "installed\r\n", "installed\n", True),
        ("string-match", "Installed", "installed", False),
        ("containing", "the answer is 42 files", "42", True),
        ("containing", "41", "42", False),
        ("in", "bob", "alice\nbob\ncarol\n", True),
        ("in", "dave", "alice\nbob", False),
        ("size-match", "8.0K", "8192", True),
        ("size-match", "4K", "4.0K\n", True),
        ("size-match", "1M", "1024K", True),
        ("size-match", "12K", "13K", False),
        ("size-match", "big", "1K", False),
    ],
)
def test_standard_checker(name: str, answer: str, expected: str, passes: bool) -> None:
    assert STANDARD_CHECKERS[name]([answer, expected]) is passes


def test_checkers_fail_rather_than_raise_on_missing_arguments() -> None:
    assert not any(checker(["only-answer"]) for checker in STANDARD_CHECKERS.values())


def test_parse_size_reads_du_style_units() -> None:
    assert parse_size("1.5K") == 1536
    assert parse_size("2GB") == 2 << 30
    with pytest.raises(ValueError, match="not a size"):
        parse_size("12 parsecs")
