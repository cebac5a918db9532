"""The persistent-shell protocol's pure parts: quoting scripts and cleaning terminal output."""

from __future__ import annotations

import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentgym_eppo.environments.os.shell import clean_output, quote_ansi_c


def bash_round_trip(text: str) -> bytes:
    quoted = "".join(quote_ansi_c(text))
    return subprocess.run(
        ["bash", "-c", f"printf %s $'{quoted}'"], capture_output=True, check=True
    ).stdout


@pytest.mark.parametrize(
    "script",
    ["echo 'hi' \"there\"", "a\\b\\\\c", "line1\nline2\ttab", "é ✓ 中文", "$(rm -rf /) `x` $HOME"],
)
def test_ansi_c_quoting_reaches_bash_byte_for_byte(script: str) -> None:
    assert bash_round_trip(script) == script.encode()


@settings(max_examples=40, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",), min_codepoint=1), max_size=80))
def test_any_text_round_trips_through_the_quoting(text: str) -> None:
    assert bash_round_trip(text) == text.encode()


def test_every_quoted_token_is_printable_ascii() -> None:
    tokens = quote_ansi_c("a'\\\n\x00\x1b\xff€")
    assert all(token.isascii() and token.isprintable() for token in tokens)
    assert tokens[:4] == ["a", "\\'", "\\\\", "\\n"]


def test_clean_output_strips_escapes_and_carriage_returns() -> None:
    raw = b"\x1b[?2004h\x1b[01;34mdir\x1b[0m\r\nfile\x07\r\n\x1b]0;title\x07done"
    assert clean_output(raw) == "dir\nfile\ndone"


def test_clean_output_replaces_invalid_utf8_and_drops_control_bytes() -> None:
    assert clean_output(b"ok\xff\xfe\x00\x01end\ttab\n") == "ok\ufffd\ufffdend\ttab\n"
