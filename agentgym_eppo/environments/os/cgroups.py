"""Per-episode control groups: the pids, memory and CPU limits of a bubblewrap sandbox.

A sandboxed process must be in its cgroup *before* bubblewrap starts (moving it later
leaves bubblewrap's children outside), so :class:`EpisodeCgroup` only creates the groups
and names the ``cgroup.procs`` files; the launcher writes its own pid there before it
execs bubblewrap. Every sandbox's root is the same host uid (100000, :mod:`.idmap`), so
``RLIMIT_NPROC`` would count all sandboxes' processes together: the pids controller is
the limit that works.

Both cgroup layouts are handled: v2 (one unified tree) and v1 (one tree per controller,
as on hosts that still mount the hybrid layout). Groups are created under the caller's
own cgroup, so a limit set on the caller still caps its sandboxes. Their names carry the
owning process id, so :func:`remove_leftovers` can find the groups of a crashed process.
"""

from __future__ import annotations

import contextlib
import errno
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from agentgym_eppo.core.processes import pid_alive

CGROUP_ROOT = Path("/sys/fs/cgroup")
GROUP_PREFIX = "agentgym-os-"


@dataclass(frozen=True)
class CgroupLimits:
    """What one sandbox may use: processes, memory (no swap), and CPUs."""

    pids: int = 256
    memory_bytes: int = 1 << 30
    cpus: float = 2.0


def _own_paths() -> dict[str, str]:
    """Controller (or "" for v2) -> this process's cgroup path, from /proc/self/cgroup."""
    paths: dict[str, str] = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        for name in controllers.split(",") if controllers else [""]:
            paths[name] = path
    return paths


def _is_v2() -> bool:
    return (CGROUP_ROOT / "cgroup.controllers").exists()


def _parents() -> dict[str, Path]:
    """Where this process may create child groups, per controller ("" for v2)."""
    own = _own_paths()
    if _is_v2():
        return {"": CGROUP_ROOT / own.get("", "/").lstrip("/")}
    parents = {}
    for controller in ("pids", "memory", "cpu"):
        mount = CGROUP_ROOT / controller
        if mount.is_dir():
            parents[controller] = mount / own.get(controller, "/").lstrip("/")
    return parents


def available() -> bool:
    """True when this process can create cgroups with a pids limit (root, writable tree)."""
    parents = _parents()
    if "" in parents:
        controllers = (parents[""] / "cgroup.controllers").read_text().split()
        return "pids" in controllers and os.access(parents[""], os.W_OK)
    return "pids" in parents and os.access(parents["pids"], os.W_OK)


EVENT_FILES = {
    "memory.events": {"oom_kill": "oom_kill", "max": "memory_max"},  # v2
    "memory.oom_control": {"oom_kill": "oom_kill"},  # v1
    "memory.failcnt": {"": "memory_max"},  # v1: a bare count
    "pids.events": {"max": "pids_max"},  # both
}
"""Files of a group that count limit events (lines ``key count``, or a bare count: key
``""``), and the names :meth:`EpisodeCgroup.events` gives them."""


class EpisodeCgroup:
    """The cgroup(s) of one sandbox: create, join (by the launcher), kill, remove."""

    def __init__(self, name: str, limits: CgroupLimits) -> None:
        self.name = f"{GROUP_PREFIX}{os.getpid()}-{name}"
        self.paths: list[Path] = []
        try:
            self._create(limits)
        except OSError:
            self.remove()
            raise

    def _create(self, limits: CgroupLimits) -> None:
        parents = _parents()
        if "" in parents:
            group = parents[""] / self.name
            group.mkdir()
            self.paths.append(group)
            wanted = {"pids", "memory", "cpu"} & set(
                (parents[""] / "cgroup.subtree_control").read_text().split()
            )
            _write(group / "pids.max", str(limits.pids))
            if "memory" in wanted:
                _write(group / "memory.max", str(limits.memory_bytes))
                _write(group / "memory.swap.max", "0", optional=True)
            if "cpu" in wanted:
                _write(group / "cpu.max", f"{int(limits.cpus * 100_000)} 100000")
            return
        for controller, parent in parents.items():
            group = parent / self.name
            group.mkdir()
            self.paths.append(group)
            if controller == "pids":
                _write(group / "pids.max", str(limits.pids))
            elif controller == "memory":
                _write(group / "memory.limit_in_bytes", str(limits.memory_bytes))
                _write(
                    group / "memory.memsw.limit_in_bytes", str(limits.memory_bytes), optional=True
                )
            elif controller == "cpu":
                _write(group / "cpu.cfs_period_us", "100000", optional=True)
                _write(group / "cpu.cfs_quota_us", str(int(limits.cpus * 100_000)), optional=True)

    @property
    def procs_files(self) -> list[str]:
        """The ``cgroup.procs`` files a launcher writes its pid to before exec'ing bwrap."""
        return [str(path / "cgroup.procs") for path in self.paths]

    def pids(self) -> set[int]:
        found: set[int] = set()
        for path in self.paths:
            try:
                found.update(int(p) for p in (path / "cgroup.procs").read_text().split())
            except OSError:
                continue
        return found

    def events(self) -> dict[str, int]:
        """The kernel's counts of limit events in the group: ``oom_kill`` (processes the
        memory limit killed), ``memory_max`` (times it was reached), ``pids_max`` (forks
        the pids limit refused), from cgroup v2's or v1's files; zeros where none is kept."""
        found = {"oom_kill": 0, "memory_max": 0, "pids_max": 0}
        for path in self.paths:
            for file, names in EVENT_FILES.items():
                with contextlib.suppress(OSError, ValueError):
                    for line in (path / file).read_text().splitlines():
                        key, _, value = line.rpartition(" ")
                        if key in names:
                            found[names[key]] += int(value)
        return found

    def kill(self) -> None:
        """SIGKILL every process in the group (``cgroup.kill`` where the kernel has it)."""
        for path in self.paths:
            if (path / "cgroup.kill").exists():
                _write(path / "cgroup.kill", "1", optional=True)
        for _ in range(3):
            remaining = self.pids()
            if not remaining:
                return
            for pid in remaining:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, 9)

    def remove(self, wait_s: float = 2.0) -> None:
        """Kill what is left and remove the groups. Waits up to ``wait_s`` for the kernel
        to reap; a group still busy then (a big tmpfs takes seconds to free when its last
        process exits) is handed to a background remover, which retries until it is gone."""
        self.kill()
        for path in self.paths:
            if not _rmdir_when_empty(path, wait_s):
                _LATE_REMOVER.add(path)
        self.paths = []


def procs_file_of(pid: int, controller: str = "pids") -> Path | None:
    """The ``cgroup.procs`` file of ``pid``'s group (v2, else the v1 ``controller`` tree)."""
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if _is_v2() and not controllers:
            return CGROUP_ROOT / path.lstrip("/") / "cgroup.procs"
        if controller in controllers.split(","):
            return CGROUP_ROOT / controller / path.lstrip("/") / "cgroup.procs"
    return None


def remove_leftovers() -> int:
    """Remove the groups of sandbox owners that no longer run (a crashed Python process).

    Returns how many groups were removed.
    """
    removed = 0
    for parent in _parents().values():
        if not parent.is_dir():
            continue
        for group in parent.glob(GROUP_PREFIX + "*"):
            owner = group.name[len(GROUP_PREFIX) :].split("-", 1)[0]
            if owner.isdigit() and not pid_alive(int(owner)):
                for pid in (group / "cgroup.procs").read_text().split():
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(int(pid), 9)
                if _rmdir_when_empty(group):
                    removed += 1
    return removed


def _write(path: Path, value: str, *, optional: bool = False) -> None:
    try:
        path.write_text(value)
    except OSError:
        if not optional:
            raise


class _LateRemover:
    """One daemon thread that removes groups whose processes took long to go."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: set[Path] = set()
        self._thread: threading.Thread | None = None

    def add(self, path: Path) -> None:
        with self._lock:
            self._pending.add(path)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name="agentgym-cgroup-remover", daemon=True
                )
                self._thread.start()

    def pending(self) -> set[Path]:
        with self._lock:
            return set(self._pending)

    def join(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for the pending groups to be removed."""
        thread = self._thread
        if thread is not None:
            thread.join(timeout)

    def _run(self) -> None:
        delay = 0.05
        while True:
            with self._lock:
                if not self._pending:
                    self._thread = None
                    return
                paths = list(self._pending)
            for path in paths:
                with contextlib.suppress(OSError):  # still busy: next round
                    for pid in (path / "cgroup.procs").read_text().split():
                        with contextlib.suppress(ProcessLookupError):
                            os.kill(int(pid), 9)
                if _rmdir_when_empty(path, 0.0):
                    with self._lock:
                        self._pending.discard(path)
            time.sleep(delay)
            delay = min(delay * 2, 2.0)


_LATE_REMOVER = _LateRemover()


def finish_late_removals(timeout: float) -> None:
    """Give the background remover up to ``timeout`` seconds to finish (at exit)."""
    _LATE_REMOVER.join(timeout)


def _rmdir_when_empty(path: Path, wait_s: float = 2.0) -> bool:
    deadline = time.monotonic() + wait_s
    while True:
        try:
            path.rmdir()
            return True
        except FileNotFoundError:
            return True
        except OSError as error:
            if error.errno != errno.EBUSY or time.monotonic() > deadline:
                return False
            time.sleep(0.002)
