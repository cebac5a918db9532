"""The embedded sandbox: bubblewrap over a per-episode overlay, limited by cgroups.

How one sandbox starts (a single ``Popen``; every step ``exec``s the next, so the
process Python holds is bubblewrap itself)::

    unshare --mount --propagation private      # a mount namespace of its own
      sh: join the episode's cgroups            # before bwrap, so every child is inside
          mount a tmpfs (the disk limit)        # upper layers of the overlays
          mount overlays: base + host /usr...   # read-only lower layers, writes to tmpfs
          exec bwrap --bind merged / ...        # pid/net/ipc/uts namespaces, caps dropped
            bash control loop (fd 0/1: pipes to Python, fd 3: the pty's slave)
              └ setsid -c env --default-signal   # own session, the pty as its terminal,
                  bash --login -i                # SIGINT not ignored (Ctrl-C must work)

The mounts live only in that mount namespace, so they vanish with the sandbox, even
when Python crashes (``--die-with-parent`` kills bubblewrap, whose pid-1 reaper takes
every sandboxed process with it). Leftover cgroups of dead owners are removed when the
next sandbox of any process starts.

The control loop answers each request with a line ``<id> <exit code> <size>`` and
``size`` bytes of output: ``shell`` starts the agent's shell, ``run`` an independent
process (for init, example and check scripts). The agent's processes are killed from the
host when needed (a timeout, a stuck shell), since a fork bomb leaves no pid to spare
inside. The agent, being root in the sandbox, can kill the loop too;
the sandbox then dies and the episode ends as a ``task_error``.

Capabilities: all dropped except Docker's default set minus ``MKNOD``, ``NET_RAW`` and
``AUDIT_WRITE``, so that ``useradd``, ``chown`` and ``su`` work as in AgentBench's
containers; ``/proc/sys`` is read-only because the sandbox's uid 0 is the host's.
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import os
import select
import shlex
import shutil
import subprocess
import termios
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from . import cgroups, rootfs
from .sandbox import (
    ProcessResult,
    Sandbox,
    SandboxError,
    SandboxLimits,
    kill_repeatedly,
    namespace_pid,
)
from .shell import FdStream, InteractiveShell, ShellClosed, quote_ansi_c

KEPT_CAPABILITIES = (
    "CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL", "CAP_SETGID",
    "CAP_SETUID", "CAP_SETPCAP", "CAP_SETFCAP", "CAP_NET_BIND_SERVICE", "CAP_SYS_CHROOT",
)  # fmt: skip

SANDBOX_ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "HOME": "/root",
    "USER": "root",
    "LOGNAME": "root",
    "SHELL": "/bin/bash",
    "TERM": "xterm",
    "HOSTNAME": "sandbox",
}

MOUNT_DIR = rootfs.BASE_CACHE / "mnt"
"""An empty host directory; each sandbox mounts its tmpfs here inside its own namespace."""

CONTROL_LOOP = r"""
exec 2>/dev/null
LC_ALL=C
ulimit -f "$1"
nonce=$2
[ -d /run/.agentgym ] || mkdir -m 700 /run/.agentgym
cd /root
while IFS= read -r line; do
    eval "words=($line)"
    id=${words[0]}; request=${words[1]}
    case $request in
    shell)
        setsid -c env --default-signal=INT,QUIT bash -c 'bash --login --noediting -i; printf "\036%s\036exit\036\n" "$0"' \
            "$nonce" <&3 >&3 2>&3 3>&- &
        printf '%s 0 0\n' "$id" ;;
    run)
        (cd /root && exec timeout -s KILL "${words[2]}" "${words[@]:3}") \
            </dev/null >/run/.agentgym/out 2>&1 3>&-
        rc=$?
        out=
        IFS= read -r -d '' -N 1048576 out </run/.agentgym/out
        printf '%s %s %s\n%s' "$id" "$rc" "${#out}" "$out" ;;
    esac
done
"""

_counter = itertools.count()
_leftovers_lock = threading.Lock()
_leftovers_removed = False


def bwrap_available() -> str | None:
    """None when bubblewrap sandboxes can run here, else the reason they cannot."""
    missing = [tool for tool in ("bwrap", "unshare", "mount") if shutil.which(tool) is None]
    if missing:
        return f"missing {', '.join(missing)} (apt-get install bubblewrap util-linux mount)"
    if os.geteuid() != 0:
        return "the bubblewrap backend mounts overlays and cgroups, which needs root"
    if not cgroups.available():
        return "no writable cgroup tree with the pids controller under /sys/fs/cgroup"
    return None


class BwrapSandbox(Sandbox):
    """One episode's bubblewrap sandbox (see the module docstring).

    ``root_dir`` is a full root filesystem to use as the only lower layer (e.g. a
    debootstrap tree); by default the base is the host's ``/usr`` with a generated
    ``/etc`` (:mod:`.rootfs`).
    """

    def __init__(
        self,
        limits: SandboxLimits | None = None,
        *,
        root_dir: str | os.PathLike[str] | None = None,
        start_timeout: float = 10.0,
        wait: bool = True,
    ) -> None:
        reason = bwrap_available()
        if reason:
            raise SandboxError(f"bubblewrap sandbox unavailable: {reason}")
        _remove_leftovers_once()
        self.limits = limits or SandboxLimits()
        self._request_ids = itertools.count()
        self._closed = False
        self._control_buffer = b""
        self._cgroup = cgroups.EpisodeCgroup(
            f"{next(_counter)}",
            cgroups.CgroupLimits(self.limits.pids, self.limits.memory_bytes, self.limits.cpus),
        )
        master, slave = os.openpty()
        _quiet_terminal(slave)
        self._master = master
        nonce = InteractiveShell.new_nonce()
        try:
            self._process = subprocess.Popen(
                self._launch_argv(nonce, root_dir),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=slave,
                env=SANDBOX_ENV,
                start_new_session=True,
            )
        except OSError as error:
            os.close(master)
            os.close(slave)
            self._cgroup.remove()
            raise SandboxError(f"cannot start bubblewrap: {error}") from None
        os.close(slave)
        self.shell = InteractiveShell(FdStream(master), nonce)
        self._start_timeout = start_timeout
        self._starting: int | None = self._send(["shell"])
        if wait:
            self.ensure_ready()

    def _launch_argv(self, nonce: str, root_dir: str | os.PathLike[str] | None) -> list[str]:
        """The launcher: the pty's slave arrives as stderr (dash reads one-digit fds only)
        and leaves as fd 3."""
        MOUNT_DIR.mkdir(parents=True, exist_ok=True)
        mnt = shlex.quote(str(MOUNT_DIR))
        lines = ["set -e"]
        lines += [f"echo $$ > {shlex.quote(path)}" for path in self._cgroup.procs_files]
        lines.append(f"mount -t tmpfs -o size={self.limits.disk_bytes},mode=755 agentgym-os {mnt}")
        if root_dir is not None:
            overlays = [("", Path(root_dir))]
        else:
            base = rootfs.host_base()
            overlays = [("", base)] + [
                (name, Path("/") / name)
                for name in rootfs.HOST_TOP_LEVEL
                if (Path("/") / name).is_dir() and not (Path("/") / name).is_symlink()
            ]
        layers = [(f"{mnt}/upper{i}", f"{mnt}/work{i}") for i in range(len(overlays))]
        lines.append(f"mkdir {mnt}/root " + " ".join(f"{up} {work}" for up, work in layers))
        for (target, lower), (upper, work) in zip(overlays, layers, strict=True):
            lines.append(
                "mount -t overlay overlay -o "
                f"lowerdir={shlex.quote(str(lower))},upperdir={upper},workdir={work} "
                f"{mnt}/root{'/' + target if target else ''}"
            )
        lines.append("exec 3<&2 2>/dev/null")
        bwrap = [
            "bwrap", "--bind", f"{MOUNT_DIR}/root", "/",
            "--proc", "/proc", "--ro-bind", "/proc/sys", "/proc/sys",
            "--ro-bind-try", "/proc/sysrq-trigger", "/proc/sysrq-trigger",
            "--dev", "/dev",
            "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts",
            "--unshare-cgroup-try", "--hostname", "sandbox", "--die-with-parent",
            "--chdir", "/root", "--cap-drop", "ALL",
        ]  # fmt: skip
        for capability in KEPT_CAPABILITIES:
            bwrap += ["--cap-add", capability]
        bwrap += ["bash", "--noprofile", "--norc", "-c", CONTROL_LOOP, "control"]
        bwrap += [str(max(1, self.limits.file_size_bytes // 1024)), nonce]
        lines.append("exec " + shlex.join(bwrap))
        script = "\n".join(lines)
        return ["unshare", "--mount", "--propagation", "private", "sh", "-c", script]

    # ------------------------------------------------------------------ control channel

    def _control(self, words: Sequence[str], timeout: float) -> tuple[int, bytes]:
        """Send one request (words quoted for the loop's ``eval``); return (code, payload)."""
        self.ensure_ready()
        return self._answer(self._send(words), timeout)

    def _send(self, words: Sequence[str]) -> int:
        request = next(self._request_ids)
        stdin = self._process.stdin
        if stdin is None or self._process.poll() is not None:
            raise SandboxError("the sandbox is not running")
        try:
            quoted = ["$'" + "".join(quote_ansi_c(word)) + "'" for word in (str(request), *words)]
            stdin.write((" ".join(quoted) + "\n").encode())
            stdin.flush()
        except (BrokenPipeError, ValueError):
            raise SandboxError("the sandbox died (its control loop is gone)") from None
        return request

    def _answer(self, request: int, timeout: float) -> tuple[int, bytes]:
        deadline = time.monotonic() + timeout
        line = self._read_control(deadline)
        fields = line.split(b" ")
        if len(fields) != 3 or fields[0] != str(request).encode():
            raise SandboxError(f"unexpected answer from the sandbox: {line[:80]!r}")
        return int(fields[1]), self._read_control(deadline, size=int(fields[2]))

    def _read_control(self, deadline: float, size: int | None = None) -> bytes:
        """One answer line (without its newline), or exactly ``size`` bytes."""
        stdout = self._process.stdout
        assert stdout is not None
        fd = stdout.fileno()
        while (
            b"\n" not in self._control_buffer if size is None else len(self._control_buffer) < size
        ):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise SandboxError("the sandbox did not answer in time")
            readable, _, _ = select.select([fd], [], [], remaining)
            if readable:
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    raise SandboxError("the sandbox died (its control loop is gone)")
                self._control_buffer += chunk
        if size is None:
            line, _, self._control_buffer = self._control_buffer.partition(b"\n")
            return line
        data, self._control_buffer = self._control_buffer[:size], self._control_buffer[size:]
        return data

    def ensure_ready(self) -> None:
        """Wait until the agent's shell answers (started without waiting: ``wait=False``)."""
        if self._starting is None:
            return
        request, self._starting = self._starting, None
        try:
            self._answer(request, self._start_timeout)
            self.shell.setup(self._start_timeout, stty=False)
        except (SandboxError, ShellClosed) as error:
            self.close()
            raise SandboxError(f"the sandbox's shell did not start: {error}") from None

    # ------------------------------------------------------------------ Sandbox API

    def run_process(self, argv: Sequence[str], timeout: float) -> ProcessResult:
        limit = f"{max(timeout, 0.1):.3f}"
        code, output = self._control(["run", limit, *argv], timeout + 10.0)
        return ProcessResult(code, output.decode("utf-8", errors="replace"))

    def process_ids(self) -> set[int]:
        return self._cgroup.pids()

    def restart_shell(self) -> None:
        """Kill every process of the agent (from the host: a fork bomb leaves no pid to spare
        inside), background jobs included, and start a new shell; the control loop and the
        pid-1 reaper stay, and so do the files."""
        keep = {self._process.pid} | {
            pid for pid in self._cgroup.pids() if namespace_pid(pid) in (1, 2)
        }
        kill_repeatedly(lambda: self._cgroup.pids() - keep)
        _drain(self._master)
        self.shell.forget()
        self._starting = self._send(["shell"])
        self.ensure_ready()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._cgroup.kill()
        process = getattr(self, "_process", None)
        if process is not None:
            try:
                process.kill()
                process.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                pass
            for stream in (process.stdin, process.stdout):
                if stream is not None:
                    with contextlib.suppress(OSError):
                        stream.close()
        self._cgroup.remove()
        with contextlib.suppress(OSError):
            os.close(self._master)

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()


def _quiet_terminal(fd: int) -> None:
    """No echo and no CR before LF on the pty, a fixed 24x80 size for programs that ask."""
    attributes = termios.tcgetattr(fd)
    attributes[1] &= ~termios.ONLCR
    attributes[3] &= ~(termios.ECHO | termios.ECHOE | termios.ECHOK | termios.ECHONL)
    termios.tcsetattr(fd, termios.TCSANOW, attributes)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, b"\x18\x00\x50\x00\x00\x00\x00\x00")


def _drain(fd: int) -> None:
    """Discard what the dead shell left on the terminal."""
    while select.select([fd], [], [], 0)[0]:
        try:
            if not os.read(fd, 1 << 16):
                return
        except OSError:
            return


def _remove_leftovers_once() -> None:
    global _leftovers_removed
    with _leftovers_lock:
        if not _leftovers_removed:
            cgroups.remove_leftovers()
            _leftovers_removed = True
