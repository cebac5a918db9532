"""Process checks of the tests: a zombie counts as gone."""

from __future__ import annotations

from pathlib import Path


def running(pid: int) -> bool:
    """True if the process exists and is not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"
