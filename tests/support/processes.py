"""Process checks of the tests: a zombie counts as gone."""

from __future__ import annotations

import os
from pathlib import Path

import psutil


def running(pid: int) -> bool:
    """True if the process exists and is not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def sandboxes(root_pid: int | None = None) -> list[psutil.Process]:
    """The OS tasks' sandboxes (bubblewrap processes) running under ``root_pid`` (None:
    this process), e.g. a server's; a live OS episode has a few."""
    found = []
    for child in psutil.Process(root_pid or os.getpid()).children(recursive=True):
        try:
            if child.name() == "bwrap" and child.status() != psutil.STATUS_ZOMBIE:
                found.append(child)
        except psutil.NoSuchProcess:
            pass
    return found
