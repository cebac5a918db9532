"""The standard checkers keep AgentBench's semantics (arguments: answer, expected), and
every check compares what the agent produced as data, never as code."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.os_backends import skip_unless
from support.os_calls import bash

from agentgym_eppo.environments.os.checkers import (
    STANDARD_CHECKERS,
    calc_check,
    parse_size,
    replacement,
)
from agentgym_eppo.environments.os.env import OSEnv
from agentgym_eppo.environments.os.tasks import Script


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


INJECTIONS = (
    "0)<1e-5 or (True",
    "__import__('os')._exit(0)",
    "$(exit 0)",
    "`true`",
    "1; exit 0",
    "x' or '1'='1",
)
"""Answers that would pass a check that ran them as code (Python, shell, SQL-ish)."""


@pytest.mark.parametrize("injection", INJECTIONS)
@pytest.mark.parametrize("name", list(STANDARD_CHECKERS))
def test_standard_checkers_read_an_injection_as_data(name: str, injection: str) -> None:
    assert not STANDARD_CHECKERS[name]([injection, "3\n"])


FORGED_CALC = (
    "printf '#!/bin/bash\\necho \"0)<1e-5 or (True\"\\n' > /usr/local/bin/calc && "
    "chmod +x /usr/local/bin/calc && calc 1 + 1"
)
"""A ``calc`` that prints code instead of a number: AgentBench's ``check/0.sh`` pasted it
into ``python3 -c "print(abs($output - $expected)<1e-5)"`` and every line passed."""


@pytest.mark.parametrize("index", [3, 5])
def test_agentbench_calc_check_compares_calc_output_as_data(
    agentbench_data: Path, index: int
) -> None:
    skip_unless("bwrap")
    folder = agentbench_data / "os_interaction"
    original = (folder / "scripts" / "dev" / "check" / "0.sh").read_text()
    env = OSEnv(folder / "dev.json", command_timeout=10.0, scripts_dir=folder / "scripts" / "dev")
    try:
        env.reset(options={"index": index})
        check = env.record.check[0]
        assert isinstance(check, Script) and check.code == calc_check() != original
        obs, _, _, _, info = env.step(bash(FORGED_CALC))
        assert info["status"] == "running" and "0)<1e-5 or (True" in obs, obs
        assert env.sandbox is not None
        # AgentBench's own script, run as written, is fooled ...
        assert env.sandbox.run_script("bash", original).exit_code == 0
        # ... the project's is not
        _, reward, terminated, _, info = env.step(
            {"name": "finish_action", "arguments": {"thought": "done"}}
        )
        assert (reward, terminated, info["status"]) == (0.0, True, "completed")
    finally:
        env.close()


def test_only_the_known_unsafe_scripts_are_replaced() -> None:
    assert replacement("exit 0\n") is None
    assert replacement(calc_check()) is None  # the replacement is not itself replaced
