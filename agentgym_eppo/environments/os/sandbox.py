"""What every OS sandbox backend offers the environment, whatever isolates it.

A sandbox is one episode's machine: an interactive shell for the agent (through the
shared protocol of :mod:`.shell`) and independent processes for the task's ``init``,
``example`` and ``check`` scripts, which AgentBench runs with ``docker exec`` beside the
agent's shell, in ``/root``, with stdout and stderr together.
"""

from __future__ import annotations

import abc
import contextlib
import os
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from .shell import CommandResult, InteractiveShell, ShellClosed

DEFAULT_COMMAND_TIMEOUT = 30.0
SCRIPT_LANGUAGES = ("bash", "python")


class SandboxError(RuntimeError):
    """The sandbox could not start, died, or its shell cannot come back.

    ``inside`` is True when the parts out of the agent's reach (bubblewrap's control
    loop in the host's pid namespace; Docker's container, as the engine reports it)
    still ran when the failure was seen: then something inside the sandbox broke, where
    only the agent's actions reach (its start-up files, its processes, the namespace
    holder it can signal). False: the backend itself failed.
    """

    def __init__(self, message: str, *, inside: bool = False) -> None:
        super().__init__(message)
        self.inside = inside


@dataclass(frozen=True)
class SandboxLimits:
    """Resource limits of one sandbox (AgentBench's container: 1 GB, 2 CPUs)."""

    memory_bytes: int = 1 << 30
    cpus: float = 2.0
    pids: int = 256
    disk_bytes: int = 512 << 20
    """Size of the per-episode writable layer (bubblewrap's tmpfs)."""
    file_size_bytes: int = 256 << 20
    """Largest file a process may write (``ulimit -f``)."""


@dataclass(frozen=True)
class ProcessResult:
    """An independent process's exit code and its stdout+stderr (``None`` code: timed out)."""

    exit_code: int | None
    output: str


def script_argv(language: str, code: str, args: Sequence[str]) -> list[str]:
    """The command line AgentBench uses for a script in ``language`` with ``args`` (Python
    in isolated mode, a departure)."""
    if language == "bash":
        return ["bash", "-c", code, "--", *args] if args else ["bash", "-c", code]
    if language == "python":
        # -I: no user site-packages, no PYTHON* variables, no current directory on the
        # path, so a module the agent left in /root or ~/.local is not the check's
        return ["python3", "-I", "-c", code, *args]
    raise ValueError(f"unsupported script language {language!r}; use one of {SCRIPT_LANGUAGES}")


def _nspids(pid: int) -> list[int]:
    """``pid`` in each pid namespace from the host's down (empty when it is gone)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return []
    for line in status.splitlines():
        if line.startswith("NSpid:"):
            return [int(field) for field in line.split()[1:]]
    return []


def namespace_pid(pid: int) -> int | None:
    """The pid that host process ``pid`` has inside its innermost pid namespace."""
    pids = _nspids(pid)
    return pids[-1] if pids else None


def namespace_depth(pid: int) -> int:
    """How many pid namespaces deep host process ``pid`` is (1: the host's; 0: gone)."""
    return len(_nspids(pid))


def _stopped(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # gone: nothing left to stop
    return stat.rpartition(")")[2].split()[0] in ("T", "t", "Z", "X")


def stop_repeatedly(pids: Callable[[], set[int]], rounds: int = 50) -> set[int]:
    """SIGSTOP what ``pids()`` names until every one is stopped (a fork bomb refills it);
    returns the pids signalled, for :func:`resume`."""
    signalled: set[int] = set()
    for _ in range(rounds):
        running = {pid for pid in pids() if not _stopped(pid)}
        if not running:
            break
        for pid in running:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)
                signalled.add(pid)
        time.sleep(0.002)
    return signalled


def resume(pids: set[int]) -> None:
    """SIGCONT each of ``pids`` (those gone meanwhile are skipped)."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)


def kill_repeatedly(pids: Callable[[], set[int]], rounds: int = 50) -> int:
    """SIGKILL what ``pids()`` names until it names nothing (a fork bomb refills it)."""
    killed = 0
    for _ in range(rounds):
        victims = pids()
        if not victims:
            break
        for pid in victims:
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except ProcessLookupError:
                pass
        time.sleep(0.005)
    return killed


class Sandbox(abc.ABC):
    """One episode's isolated machine. ``close`` is idempotent and never raises."""

    shell: InteractiveShell

    def ensure_ready(self) -> None:  # noqa: B027 - optional hook, a no-op by default
        """Wait until the sandbox is up (a backend may return from its constructor earlier)."""

    def check_alive(self) -> None:  # noqa: B027 - optional hook, a no-op by default
        """Raise :class:`SandboxError` if the sandbox is known to be dead (a cheap look,
        no command: a sandbox kept in reserve may have died while it waited)."""

    def host_side_alive(self) -> bool:
        """Whether the parts of the sandbox the agent cannot reach still run (see
        :class:`SandboxError`); False where the backend cannot tell."""
        return False

    def state(self) -> str:
        """What the backend can tell of the sandbox's state, for an error message about it
        (empty where it can tell nothing)."""
        return ""

    def run_process(self, argv: Sequence[str], timeout: float) -> ProcessResult:
        """Run ``argv`` as an independent process in ``/root`` (stdin empty), with every
        process of the agent stopped meanwhile.

        Stopped, the agent cannot touch a check while it runs (write into its output,
        signal it, swap the files it is about to read); resumed afterwards, so the
        sandbox goes on as before. Where the backend cannot see the agent's processes
        (a remote Docker engine) the check runs beside them, as in AgentBench.
        """
        self.ensure_ready()  # a sandbox still booting does not know its own processes yet
        stopped = stop_repeatedly(self.process_ids)
        try:
            return self._run_process(argv, timeout)
        finally:
            resume(stopped)

    @abc.abstractmethod
    def _run_process(self, argv: Sequence[str], timeout: float) -> ProcessResult:
        """Run ``argv`` as an independent process (see :meth:`run_process`)."""

    @abc.abstractmethod
    def restart_shell(self) -> None:
        """Start a fresh interactive shell after the agent's one exited or got stuck."""

    @abc.abstractmethod
    def close(self) -> None:
        """Tear the sandbox down: every process killed, every write discarded."""

    def run_script(
        self, language: str, code: str, args: Sequence[str] = (), timeout: float = 60.0
    ) -> ProcessResult:
        return self.run_process(script_argv(language, code, args), timeout)

    @abc.abstractmethod
    def process_ids(self) -> set[int]:
        """Host pids of the agent's processes in the sandbox (for the host-side kill on
        timeouts and the stop while a check runs); not the backend's own."""

    def pids_snapshot(self) -> set[int]:
        """A cheap superset of :meth:`process_ids` (taken before every command, so that
        a timeout kills only what the command started)."""
        return self.process_ids()

    def run_command(self, script: str, timeout: float) -> CommandResult:
        """Run ``script`` in the agent's shell; raises :class:`SandboxError` if the sandbox died.

        On timeout the shell gets Ctrl-C and then every process that was not there before
        the command is killed from the host, repeatedly, so that a fork bomb is drained;
        the shell, the task's background process and earlier ``&`` jobs are kept.
        """
        self.ensure_ready()
        before = self.pids_snapshot()
        try:
            return self.shell.run(
                script, timeout, lambda: kill_repeatedly(lambda: self.process_ids() - before)
            )
        except ShellClosed as error:
            raise SandboxError(str(error), inside=self.host_side_alive()) from None

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
