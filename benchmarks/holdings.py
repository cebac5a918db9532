"""What a process and its children hold, counted by owner (not system-wide).

The soaks (``benchmarks/soak.py``, ``benchmarks/bench_serving.py``) run their processes
in :func:`private_environment`: a private ``TMPDIR`` and a marker in the environment that
every child inherits. :func:`count_holdings` then counts, at one moment, the marked
processes, the bubblewrap sandboxes among them, the agentgym mounts, the cgroups of the
owning pids, the entries in the private ``TMPDIR``, one process's fds and threads, and
the MariaDB databases and users of episodes started since the soak began. A soak keeps
the counts it reports in a :class:`Holdings` subclass; what was left behind is
``after.minus(before)``.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TypeVar

import psutil

from agentgym_eppo.environments.os.cgroups import CGROUP_ROOT, GROUP_PREFIX

MARKER_VARIABLE = "AGENTGYM_SOAK_MARKER"
EPISODE_DB_PREFIX = "agentgym_ep_"
RESOURCE_TRACKER = "multiprocessing.resource_tracker"
"""multiprocessing's helper process: one per parent process, started with the first
worker and ended when the parent exits; not an episode's resource."""


@contextlib.contextmanager
def private_environment(marker: str) -> Iterator[Path]:
    """A private ``TMPDIR`` and the process marker, for this process and its children."""
    saved = {key: os.environ.get(key) for key in ("TMPDIR", MARKER_VARIABLE)}
    with tempfile.TemporaryDirectory(prefix="agentgym-soak-") as folder:
        os.environ["TMPDIR"] = folder
        os.environ[MARKER_VARIABLE] = marker
        tempfile.tempdir = None
        try:
            yield Path(folder)
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
            tempfile.tempdir = None


def marked_processes(marker: str, *, trackers: bool = False) -> list[psutil.Process]:
    """Every live process whose environment carries ``MARKER_VARIABLE=marker``, except us
    (children inherit it, daemonised or not) and, unless ``trackers``, multiprocessing's
    resource tracker."""
    found = []
    needle = f"{MARKER_VARIABLE}={marker}".encode()
    for process in psutil.process_iter(["pid"]):
        if process.pid == os.getpid():
            continue
        with contextlib.suppress(OSError, psutil.Error):
            environ = Path(f"/proc/{process.pid}/environ").read_bytes()
            if needle not in environ.split(b"\0") or process.status() == psutil.STATUS_ZOMBIE:
                continue
            if not trackers and RESOURCE_TRACKER in " ".join(process.cmdline()):
                continue
            found.append(process)
    return found


def sandbox_count(processes: Sequence[psutil.Process]) -> int:
    """How many of ``processes`` are bubblewrap sandboxes."""
    count = 0
    for process in processes:
        with contextlib.suppress(psutil.Error):
            if process.name() == "bwrap":
                count += 1
    return count


def cgroups_of(owner_pids: set[int]) -> int:
    """The OS task's cgroups whose name carries one of ``owner_pids``."""
    count = 0
    for path in CGROUP_ROOT.rglob(f"{GROUP_PREFIX}*"):
        owner = path.name[len(GROUP_PREFIX) :].split("-", 1)[0]
        if owner.isdigit() and int(owner) in owner_pids:
            count += 1
    return count


def own_mounts() -> int:
    """Mount points in this process's namespace that an episode could have left (the OS
    sandbox's tmpfs and overlays are named ``agentgym``; Docker's own overlays, which
    other users of the machine start, are not counted)."""
    text = Path("/proc/self/mountinfo").read_text()
    return sum(
        1
        for line in text.splitlines()
        if "agentgym" in line or (" overlay " in line and "/var/lib/docker/" not in line)
    )


def episode_databases(url: str | None, since: float) -> tuple[int, int]:
    """MariaDB databases and users named like an episode's, created at or after ``since``
    (the name carries its creation time), or (0, 0) with no server URL."""
    if url is None:
        return 0, 0
    import sqlalchemy as sa

    engine = sa.create_engine(url)
    try:
        with engine.connect() as connection:
            names = [row[0] for row in connection.exec_driver_sql("SHOW DATABASES")]
            users = [row[0] for row in connection.exec_driver_sql("SELECT User FROM mysql.user")]
    finally:
        engine.dispose()

    def ours(name: str) -> bool:
        match = re.match(rf"^{EPISODE_DB_PREFIX}(\d+)_", name)
        return match is not None and int(match.group(1)) >= int(since)

    return sum(map(ours, names)), sum(map(ours, users))


def count_holdings(
    owner: psutil.Process,
    marker: str,
    temp_dir: Path,
    owner_pids: set[int],
    db_url: str | None,
    since: float,
) -> dict[str, int]:
    """Every count, by name: the processes marked ``marker`` other than ``owner`` (and the
    sandboxes among them), the agentgym mounts, the cgroups of ``owner_pids``, the entries
    under ``temp_dir``, ``owner``'s fds and threads, and the episode databases and users
    on ``db_url`` since ``since``."""
    processes = [p for p in marked_processes(marker) if p.pid != owner.pid]
    databases, db_users = episode_databases(db_url, since)
    return {
        "processes": len(processes),
        "sandboxes": sandbox_count(processes),
        "mounts": own_mounts(),
        "cgroups": cgroups_of(owner_pids),
        "temp_entries": sum(1 for _ in temp_dir.rglob("*")),
        "fds": owner.num_fds(),
        "threads": owner.num_threads(),
        "databases": databases,
        "db_users": db_users,
    }


Counts = TypeVar("Counts", bound="Holdings")


@dataclass(frozen=True)
class Holdings:
    """The counts a soak reports, in its report's order: these, then its subclass's
    fields (each named as in :func:`count_holdings`)."""

    processes: int
    sandboxes: int
    mounts: int
    cgroups: int
    temp_entries: int
    fds: int

    @classmethod
    def of(cls: type[Counts], counts: dict[str, int]) -> Counts:
        """The fields of ``cls`` out of :func:`count_holdings`' ``counts``."""
        return cls(**{field.name: counts[field.name] for field in fields(cls)})

    def minus(self, other: Holdings) -> dict[str, int]:
        return {key: value - getattr(other, key) for key, value in vars(self).items()}
