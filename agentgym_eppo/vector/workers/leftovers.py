"""The workers' temp folders: named after their owner, and removed once it is gone.

Each pool keeps its workers' ``TMPDIR`` folders under one root in the system temp
directory, ``agentgym-vector-<owner pid>-<random>``. ``close`` (or garbage collection)
removes the root; a run killed with SIGKILL cannot, so every process removes, before
it makes its first root, the roots whose owner is no longer running, as the OS
sandbox does for its cgroups. A pid the kernel has since given to a newer process
does not keep a root alive: the owner must have started before the root was last
changed.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import tempfile
import threading
from pathlib import Path

logger = logging.getLogger(__name__)

ROOT_PREFIX = "agentgym-vector-"
_OWNED_ROOT = re.compile(rf"^{re.escape(ROOT_PREFIX)}(\d+)-[^/]+$")
_lock = threading.Lock()
_removed_once = False


def make_root() -> Path:
    """A new root for this process's workers (stale roots of dead owners removed first)."""
    remove_stale_roots_once()
    return Path(tempfile.mkdtemp(prefix=f"{ROOT_PREFIX}{os.getpid()}-"))


def remove_stale_roots_once() -> None:
    global _removed_once
    with _lock:
        if not _removed_once:
            _removed_once = True
            removed = remove_stale_roots()
            if removed:
                logger.info("removed %d leftover vector temp folder(s): %s", len(removed), removed)


def remove_stale_roots(directory: str | None = None) -> list[str]:
    """Remove the roots in ``directory`` (the system temp dir) whose owner has exited;
    return their paths. Roots of other users and of live owners are left alone."""
    found: list[str] = []
    base = Path(directory or tempfile.gettempdir())
    try:
        entries = list(base.iterdir())
    except OSError:
        return found
    for path in entries:
        match = _OWNED_ROOT.match(path.name)
        if match is None:
            continue
        try:
            info = path.lstat()
        except OSError:
            continue
        if not path.is_dir() or path.is_symlink() or info.st_uid != os.getuid():
            continue
        if _owner_alive(int(match.group(1)), info.st_mtime):
            continue
        shutil.rmtree(path, ignore_errors=True)
        found.append(str(path))
    return found


def _owner_alive(pid: int, root_changed: float) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # alive, another user's
    except OverflowError:
        return False
    started = _start_time(pid)
    # Slack for the clock-tick rounding of the start time.
    return started is None or started <= root_changed + 1.0


def _start_time(pid: int) -> float | None:
    """When ``pid`` started (seconds since the epoch), from /proc; None if unknown."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        boot = next(
            float(line.split()[1])
            for line in Path("/proc/stat").read_text().splitlines()
            if line.startswith("btime ")
        )
        ticks = float(stat.rsplit(")", 1)[1].split()[19])
        return boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return None
