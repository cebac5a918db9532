"""The Docker sandbox: one container per episode, the same persistent-shell protocol.

Like AgentBench: a container from the task's image (``local-os/default`` unless the task
names one) running ``sleep infinity`` in ``/root``, 1 GB of memory without swap, 2 CPUs,
``network_mode="none"``; the agent's shell is one ``docker exec`` of ``bash --login`` on a
tty, spoken to through :class:`~.shell.InteractiveShell`; init, example and check scripts
are further ``docker exec`` calls. Containers carry labels naming their owner process,
so the containers of a crashed owner are removed when the next sandbox starts. The disk
limit is not applied (overlay2 quotas need XFS); a file-size limit is.
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentgym_eppo.core.processes import once_per_process, pid_alive

from . import cgroups
from .sandbox import (
    ProcessResult,
    Sandbox,
    SandboxError,
    SandboxLimits,
    kill_repeatedly,
    namespace_pid,
)
from .shell import InteractiveShell, ShellClosed, ShellStream

LABEL = "agentgym-eppo-os"
DROPPED_CAPABILITIES = ["MKNOD", "NET_RAW", "AUDIT_WRITE"]


def docker_client() -> Any:
    """A Docker SDK client for the local engine; raises SandboxError if there is none."""
    try:
        import docker
    except ImportError:
        raise SandboxError(
            "the docker backend needs the 'docker' package (pip install docker)"
        ) from None
    try:
        client = docker.from_env(timeout=60)
        client.ping()
    except Exception as error:
        raise SandboxError(f"no Docker engine reachable: {error}") from None
    return client


class SocketStream(ShellStream):
    """The raw socket of a ``docker exec`` with a tty as a :class:`ShellStream`."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.sock.settimeout(10.0)

    def fileno(self) -> int:
        return self.sock.fileno()

    def read_available(self) -> bytes | None:
        try:
            return self.sock.recv(1 << 16, socket.MSG_DONTWAIT)
        except BlockingIOError:
            return None
        except OSError:
            return b""

    def write(self, data: bytes) -> None:
        try:
            self.sock.sendall(data)
        except OSError as error:
            raise ShellClosed(f"the container's terminal closed ({error})") from None

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()


class DockerSandbox(Sandbox):
    """One episode's container (see the module docstring)."""

    def __init__(
        self,
        limits: SandboxLimits | None = None,
        *,
        image: str = "local-os/default",
        client: Any = None,
        start_timeout: float = 20.0,
    ) -> None:
        self.limits = limits or SandboxLimits()
        self.client = client or docker_client()
        self._closed = False
        self._stream: SocketStream | None = None
        self._procs_file: Path | None = None
        _remove_leftovers_once(self.client)
        try:
            self.container = self.client.containers.run(
                image,
                ["sleep", "infinity"],
                detach=True,
                working_dir="/root",
                hostname="sandbox",
                network_mode="none",
                mem_limit=self.limits.memory_bytes,
                memswap_limit=self.limits.memory_bytes,
                nano_cpus=int(self.limits.cpus * 1e9),
                pids_limit=self.limits.pids,
                cap_drop=DROPPED_CAPABILITIES,
                ulimits=[_fsize_ulimit(self.limits.file_size_bytes)],
                environment={"HOME": "/root", "TERM": "xterm"},
                labels={LABEL: "1", f"{LABEL}.owner": f"{socket.gethostname()}:{os.getpid()}"},
            )
        except Exception as error:
            raise SandboxError(f"cannot start a container from {image!r}: {error}") from None
        try:
            self.container.reload()
            procs = cgroups.procs_file_of(int(self.container.attrs["State"]["Pid"]))
            self._procs_file = procs if procs is not None and procs.exists() else None
            self._start_shell(start_timeout)
        except BaseException:
            self.close()
            raise

    def _start_shell(self, timeout: float) -> None:
        # the exit nonce is the first line the wrapper reads from the terminal (see .shell)
        wrapper = (
            'IFS= read -r n; bash --login --noediting -i; printf "\\036%s\\036exit\\036\\n" "$n"'
        )
        try:
            exec_id = self.client.api.exec_create(
                self.container.id, ["bash", "-c", wrapper], stdin=True, tty=True, workdir="/root"
            )["Id"]
            sock = self.client.api.exec_start(exec_id, socket=True, tty=True)._sock
        except Exception as error:
            raise SandboxError(f"cannot start the container's shell: {error}") from None
        if self._stream is not None:
            self._stream.close()
        self._stream = SocketStream(sock)
        self.shell = InteractiveShell(self._stream)
        try:
            self.shell.setup(timeout, stty=True)
        except ShellClosed as error:
            raise SandboxError(
                f"the container's shell did not start: {error}", inside=self.host_side_alive()
            ) from None

    def _run_process(self, argv: Sequence[str], timeout: float) -> ProcessResult:
        command = ["timeout", "-s", "KILL", f"{max(timeout, 0.1):.3f}", *argv]
        try:
            result = self.container.exec_run(command, workdir="/root", stdin=False)
        except Exception as error:
            raise SandboxError(f"docker exec failed: {error}") from None
        return ProcessResult(int(result.exit_code), result.output.decode("utf-8", errors="replace"))

    def host_side_alive(self) -> bool:
        """The engine answers and reports the container running (its init, pid 1, ignores
        the signals a process inside can send it)."""
        try:
            self.container.reload()
        except Exception:
            return False
        return bool(self.container.status == "running")

    def process_ids(self) -> set[int]:
        """Host pids of the container's processes but its init, read from its cgroup.
        Empty when the engine is not on this host (then pids mean nothing here and
        nothing is killed or stopped from the host)."""
        if self._procs_file is None:
            return set()
        try:
            pids = {int(pid) for pid in self._procs_file.read_text().split()}
        except OSError:
            return set()
        return {pid for pid in pids if namespace_pid(pid) not in (1, None)}

    def restart_shell(self) -> None:
        """Kill every process but the container's init, background jobs included (from the
        host when the engine is local: a fork bomb leaves no pid for ``docker exec``),
        then start a new shell."""
        if self._procs_file is not None:
            kill_repeatedly(self.process_ids)
        else:
            with contextlib.suppress(Exception):
                self.container.exec_run(["kill", "-9", "-1"], stdin=False)
        self._start_shell(20.0)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._stream is not None:
            self._stream.close()
        container = getattr(self, "container", None)
        if container is not None:
            with contextlib.suppress(Exception):
                container.remove(force=True)

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()


def _fsize_ulimit(size: int) -> Any:
    import docker.types

    return docker.types.Ulimit(name="fsize", soft=size, hard=size)


def remove_leftovers(client: Any) -> int:
    """Remove containers whose owner process (on this host) no longer runs."""
    removed = 0
    host = socket.gethostname()
    for container in client.containers.list(all=True, filters={"label": LABEL}):
        owner = container.labels.get(f"{LABEL}.owner", "")
        owner_host, _, pid = owner.rpartition(":")
        if owner_host != host or not pid.isdigit() or pid_alive(int(pid)):
            continue
        try:
            container.remove(force=True)
            removed += 1
        except Exception:
            continue
    return removed


_remove_leftovers_once = once_per_process(remove_leftovers)
