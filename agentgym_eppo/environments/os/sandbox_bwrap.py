"""The embedded sandbox: bubblewrap over a per-episode overlay, limited by cgroups.

Who runs where (one ``Popen``; the launcher ``exec``s the control loop)::

    unshare --mount --propagation private        # a mount namespace of its own, host pids
      sh: join the episode's cgroups, mount a tmpfs (the disk limit), the base's
          directories idmapped (idmap.py, which also starts the user namespace's
          sleeper) and the overlays on them
        bash control loop (fd 0/1: pipes to Python; host root, host pid namespace,
                           unseen inside)
          ├ holder: nsenter user -- bwrap --unshare-pid/net/ipc/uts -- sleep  # owns the
          │                                         # sandbox's namespaces (its pid 1, 2)
          ├ agent:  nsenter user/net/ipc/uts -- bwrap --pidns <holder's> <agent view> --seccomp
          │           └ setsid bash --login -i       # on the pty, caps dropped, filtered
          └ check:  nsenter user/net/ipc/uts -- bwrap --pidns <holder's> <judge view> --seccomp
                      └ timeout bash -c <init, example or check script>

Every process of the sandbox runs in a user namespace whose ids 0-65535 are the host's
100000-165535 (:mod:`.idmap`); the base's files are shown through idmapped mounts, so
they belong to the sandbox's root as an image does in a container.

The control loop, which carries every verdict, lives outside the sandbox's pid
namespace: no process of the sandbox can see it, signal it, or open its
``/proc/<pid>/fd``. Init, example and check scripts (``run``) see the agent's machine
through the *judge view*: the agent's files, but every directory of the base's ``/usr``
and ``/bin``, ``/sbin``, ``/lib*`` read-only from the base (only ``/usr/local/bin`` and
``/usr/local/sbin`` of the agent's, last in ``PATH``), so a check never runs a program the
agent replaced; its output goes to a tmpfs of its own, which a full disk cannot touch. While a script runs,
every process of the agent is stopped (:meth:`Sandbox.run_process`): the view is built
and the check runs with nothing of the agent's moving. In both views the loader's and
the interpreters' configuration under ``/etc`` (``ld.so.preload``, ``ld.so.cache``,
``alternatives``, ``python3*``) is a read-only mount of the base's, and ``/etc`` and the
base's top-level directories are mount points, which cannot be renamed or replaced.

The mounts live only in the launcher's mount namespace, so they vanish with the sandbox,
even when Python crashes (the control loop ends at EOF on its stdin, and every bwrap has
``--die-with-parent``). Leftover cgroups of dead owners are removed when the next sandbox
of any process starts; a group still busy when an episode closes is removed in the
background (:func:`.cgroups.EpisodeCgroup.remove`).

The control loop answers each request with a line ``<id> <exit code> <size>`` and
``size`` bytes of output: ``shell`` starts the agent's shell, ``run`` an independent
process. The agent's processes are killed from the host when needed (a timeout, a stuck
shell), since a fork bomb leaves no pid to spare inside.

Capabilities: all dropped except Docker's default set minus ``MKNOD``, ``NET_RAW`` and
``AUDIT_WRITE``, so that ``useradd``, ``chown`` and ``su`` work as in AgentBench's
containers; a seccomp filter (:mod:`.seccomp`) refuses what those capabilities do not
cover (keyrings, namespaces, ``ptrace``, mounts, modules...); they act on the sandbox's
user namespace only. ``/proc/sys`` is read-only as in Docker.

The control loop is a bash script shipped beside this module (:data:`CONTROL_LOOP`). The
launcher's argv and the loop's bwrap arguments are pure functions (:func:`launch_argv`,
:func:`control_values`) of what :func:`read_base_layout` reads of the base.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import functools
import hashlib
import itertools
import os
import select
import shlex
import shutil
import subprocess
import sys
import termios
import time
import weakref
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from agentgym_eppo.core.processes import once_per_process

from . import cgroups, idmap, rootfs, seccomp
from .sandbox import (
    ProcessResult,
    Sandbox,
    SandboxError,
    SandboxLimits,
    kill_repeatedly,
    namespace_depth,
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

JUDGE_PATH = "/usr/sbin:/usr/bin:/sbin:/bin:/usr/local/sbin:/usr/local/bin"
"""The base's programs first: a ``grep`` the agent put in /usr/local/bin is not the check's."""

PROTECTED_ETC = ("ld.so.preload", "ld.so.cache", "alternatives")
"""Files under /etc that decide which code the base's programs load (plus ``python3*``)."""

JUDGE_SCRATCH_BYTES = 64 * 1024 * 1024
"""The tmpfs that takes an init, example or check script's output (of which the first
MiB is read), apart from the episode's disk: filling that disk cannot touch it."""

MOUNT_DIR = rootfs.BASE_CACHE / "mnt"
"""An empty host directory; each sandbox mounts its tmpfs here inside its own namespace."""

CONTROL_LOOP = "control_loop.sh"
"""The control loop's script, package data beside this module (run by bash after the
assignments of :func:`control_assignments`)."""

REAP_SETTLE_SECONDS = 1.0
"""How long a failed shell's sandbox waits for its control loop to show an exit that has
begun (the terminal closes before the process can be reaped); paid only after a failure."""

_counter = itertools.count()
_open_sandboxes: weakref.WeakSet[BwrapSandbox] = weakref.WeakSet()


@atexit.register
def _close_open_sandboxes() -> None:
    """Tear down what is still open when Python exits, before the interpreter finalizes
    (a sandbox an exception's traceback kept alive would else close in ``__del__`` while
    modules and threads are being torn down)."""
    for sandbox in list(_open_sandboxes):
        sandbox.close()
    cgroups.finish_late_removals(timeout=5.0)


def bwrap_available() -> str | None:
    """None when bubblewrap sandboxes can run here, else the reason they cannot."""
    missing = [tool for tool in ("bwrap", "unshare", "mount") if shutil.which(tool) is None]
    if missing:
        return f"missing {', '.join(missing)} (apt-get install bubblewrap util-linux mount)"
    if os.geteuid() != 0:
        return "the bubblewrap backend mounts overlays and cgroups, which needs root"
    if not cgroups.available():
        return "no writable cgroup tree with the pids controller under /sys/fs/cgroup"
    if not idmap.kernel_supported(os.uname().release):
        return f"Linux {os.uname().release} cannot build an overlay on idmapped mounts (5.19+)"
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
        self._holder: set[int] = set()
        self._cgroup = cgroups.EpisodeCgroup(
            f"{next(_counter)}",
            cgroups.CgroupLimits(self.limits.pids, self.limits.memory_bytes, self.limits.cpus),
        )
        master, slave = os.openpty()
        _quiet_terminal(slave)
        self._master = master
        try:
            self._process = subprocess.Popen(
                self._launch_argv(root_dir),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=slave,
                env=SANDBOX_ENV,
                start_new_session=True,
            )
        except OSError as error:
            self._closed = True  # nothing for close() to do: its descriptors are closed here
            os.close(master)
            os.close(slave)
            self._cgroup.remove()
            raise SandboxError(f"cannot start bubblewrap: {error}") from None
        os.close(slave)
        _open_sandboxes.add(self)
        self.shell = InteractiveShell(FdStream(master))
        self._start_timeout = start_timeout
        self._starting: int | None = self._send(["shell", self.shell.exit_nonce])
        if wait:
            self.ensure_ready()

    def _launch_argv(self, root_dir: str | os.PathLike[str] | None) -> list[str]:
        """The launcher's argv: what it needs read from the machine, built by
        :func:`launch_argv` and :func:`control_assignments`."""
        MOUNT_DIR.mkdir(parents=True, exist_ok=True)
        mnt = str(MOUNT_DIR)
        base = Path(root_dir) if root_dir is not None else rootfs.host_base()
        full_root = root_dir is not None
        layout = read_base_layout(base if full_root else Path("/"), base / "etc")
        overlays = overlay_layers(base, () if full_root else layout.directories)
        views = [(host, f"{mnt}/{lower}") for _, host, lower in overlays]
        values = control_values(
            f"{mnt}/root",
            layout,
            views,
            pin_base_dirs=full_root,
            scratch=f"{MOUNT_DIR}/judge/scratch",
            seccomp=str(seccomp_file()),
        )
        control = ["bash", "--noprofile", "--norc", "-c"]
        control += [control_assignments(values) + control_loop_script(), "control"]
        control += [str(max(1, self.limits.file_size_bytes // 1024))]
        return launch_argv(
            mnt=mnt,
            overlays=overlays,
            procs_files=self._cgroup.procs_files,
            disk_bytes=self.limits.disk_bytes,
            idmap_helper=[sys.executable, "-I", "-S", idmap.__file__],
            control=control,
        )

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
            first_start = not self._holder
            if first_start:
                self._holder = self._find_holder(self._start_timeout)
            try:
                self.shell.setup(self._start_timeout, stty=False, nonce_on_terminal=False)
            except ShellClosed:
                if not first_start:  # a restart after the agent's commands: theirs to break
                    raise
                # once in a CI run the first shell was gone before it answered, with no word
                # on the terminal and the control loop and holder fine: no agent command had
                # run yet, so it is started once more (a second failure is raised)
                self.check_alive()
                self._kill_shell()
                self._answer(self._send(["shell", self.shell.exit_nonce]), self._start_timeout)
                self.shell.setup(self._start_timeout, stty=False, nonce_on_terminal=False)
        except (SandboxError, ShellClosed) as error:
            state = self.state()
            inside = self.host_side_alive()
            self.close()
            raise SandboxError(
                f"the sandbox's shell did not start: {error} ({state})", inside=inside
            ) from None

    def check_alive(self) -> None:
        if self._closed or self._process.poll() is not None:
            raise SandboxError("the sandbox died (its control loop is gone)")
        if not self._holder <= self._cgroup.pids():
            raise SandboxError(f"the sandbox died ({self.state()})")

    def host_side_alive(self) -> bool:
        """The control loop runs (in the host's pid namespace: no process of the sandbox
        can signal it). Asked only once the shell has failed: a control loop that died a
        moment ago has closed the terminal before the kernel lets it be reaped, so it gets
        :data:`REAP_SETTLE_SECONDS` to show its exit rather than be taken for alive (and
        the backend's failure for the agent's)."""
        if self._closed:
            return False
        try:
            self._process.wait(timeout=REAP_SETTLE_SECONDS)
        except subprocess.TimeoutExpired:
            return True
        return False

    def state(self) -> str:
        """What is left of the sandbox, and the kernel's limit events of its cgroup."""
        code = self._process.poll()
        launcher = "running" if code is None else f"exited with {code}"
        pids = self._cgroup.pids()
        holder = "unknown" if not self._holder else f"{len(self._holder & pids)} of 2 alive"
        events = self._cgroup.events()
        return (
            f"control loop {launcher}, {len(pids)} processes in its cgroup, holder {holder}"
            + "".join(f", {name} {count}" for name, count in events.items() if count)
        )

    # ------------------------------------------------------------------ Sandbox API

    def _run_process(self, argv: Sequence[str], timeout: float) -> ProcessResult:
        limit = f"{max(timeout, 0.1):.3f}"
        code, output = self._control(["run", limit, *argv], timeout + 10.0)
        return ProcessResult(code, output.decode("utf-8", errors="replace"))

    def process_ids(self) -> set[int]:
        """The agent's processes: in the sandbox's pid namespace (or deeper), except the
        holder's two; not the control loop or the bwrap monitors (host pid namespace)."""
        return {
            pid
            for pid in self._cgroup.pids()
            if pid not in self._holder and namespace_depth(pid) >= 2
        }

    def pids_snapshot(self) -> set[int]:
        return self._cgroup.pids()  # no /proc reads per pid: every command takes one

    def _find_holder(self, timeout: float) -> set[int]:
        """The holder's pid 1 and its ``sleep``, found before the agent's first command
        (its pid 1 may fork the ``sleep`` a moment after the agent's shell started)."""
        deadline = time.monotonic() + timeout
        while True:
            inside = {pid: _parent(pid) for pid in self._cgroup.pids() if namespace_depth(pid) == 2}
            init = [pid for pid in inside if namespace_pid(pid) == 1]
            sleeper = [
                pid
                for pid, parent in inside.items()
                if init and parent == init[0] and _cmdline(pid) == b"sleep\0infinity\0"
            ]
            if init and sleeper:
                return {init[0], sleeper[0]}
            if time.monotonic() > deadline:
                raise SandboxError("the sandbox's namespace holder did not start")
            time.sleep(0.002)

    def restart_shell(self) -> None:
        """Kill every process of the agent (from the host: a fork bomb leaves no pid to spare
        inside), background jobs included, and start a new shell; the control loop and the
        holder stay, and so do the files."""
        self._kill_shell()
        self._starting = self._send(["shell", self.shell.exit_nonce])
        self.ensure_ready()

    def _kill_shell(self) -> None:
        """Kill what is left of the agent's processes; forget its shell's unread output."""
        kill_repeatedly(self.process_ids)
        _drain(self._master)
        self.shell.forget()

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


# ---------------------------------------------------------------------- argv builders
# Pure functions of what _launch_argv read from the machine, so that the launcher's and
# the control loop's bwrap arguments can be checked without a sandbox.

Layer = tuple[str, Path, str]
"""An overlay: its mount point under the root, its host directory, and the name of the
host directory's idmapped view under the tmpfs."""


@dataclass(frozen=True)
class BaseLayout:
    """What the bwrap views show of the base, read by :func:`read_base_layout`.

    ``top`` and ``usr`` name the entries of :data:`rootfs.HOST_TOP_LEVEL` and of ``/usr``
    that exist, each with its symlink target, or None for a directory.
    """

    source: Path
    """Where the top level was read: the base when it is a full root, else ``/``."""
    top: tuple[tuple[str, str | None], ...]
    usr: tuple[tuple[str, str | None], ...]
    """The base's ``/usr`` entries, sorted (none when ``/usr`` is not a directory)."""
    protected_etc: tuple[str, ...]
    """Files under ``/etc`` mounted read-only from the base: those of
    :data:`PROTECTED_ETC` it has (``ld.so.preload`` always), then its ``python3*``."""

    @property
    def directories(self) -> tuple[str, ...]:
        """The top-level names that are directories, not symlinks."""
        return tuple(name for name, target in self.top if target is None)


def read_base_layout(source: Path, base_etc: Path) -> BaseLayout:
    """The top level of ``source`` and its ``/usr``, and the protected files of
    ``base_etc``."""

    def entry(path: Path) -> tuple[str, str | None] | None:
        if path.is_symlink():
            return path.name, os.readlink(path)
        return (path.name, None) if path.is_dir() else None

    top = [found for name in rootfs.HOST_TOP_LEVEL if (found := entry(source / name))]
    usr: list[tuple[str, str | None]] = []
    if ("usr", None) in top:
        usr = [found for part in sorted((source / "usr").iterdir()) if (found := entry(part))]
    protected = [
        name for name in PROTECTED_ETC if name == "ld.so.preload" or (base_etc / name).exists()
    ]
    protected += sorted(path.name for path in base_etc.glob("python3*"))
    return BaseLayout(source, tuple(top), tuple(usr), tuple(protected))


def overlay_layers(base: Path, host_dirs: Collection[str]) -> list[Layer]:
    """The base, then the host's top-level directories named in ``host_dirs`` over it
    (none when the base is a full root); the views keep their place in
    :data:`rootfs.HOST_TOP_LEVEL` in their names.

    >>> overlay_layers(Path("/base"), ["usr", "lib"])
    [('', PosixPath('/base'), 'l0'), ('usr', PosixPath('/usr'), 'lower1'), ('lib', PosixPath('/lib'), 'lower4')]
    """
    layers: list[Layer] = [("", base, "l0")]
    layers += [
        (name, Path("/") / name, f"lower{i}")
        for i, name in enumerate(rootfs.HOST_TOP_LEVEL, start=1)
        if name in host_dirs
    ]
    return layers


def idmapped(path: Path, views: Sequence[tuple[Path, str]]) -> str:
    """Where the sandbox sees the base's ``path``: through the idmapped view of the
    layer that holds it (``views``: each host directory of the base and its view).

    >>> idmapped(Path("/usr/lib"), [(Path("/base"), "/mnt/l0"), (Path("/usr"), "/mnt/lower1")])
    '/mnt/lower1/lib'
    """
    for host, view in views:
        if path == host or host in path.parents:
            return str(Path(view) / path.relative_to(host))
    raise ValueError(f"{path} is in no layer of the base")


@dataclass(frozen=True)
class BaseViews:
    """The bwrap arguments that show the base read-only, and what the control loop's
    ``judge_view`` compares the agent's tree with."""

    whole: list[str]
    """Every top-level entry of the base (the holder's view)."""
    dirs: list[str]
    """Its top-level directories but ``/usr`` (``BASE_DIRS``)."""
    usr: list[str]
    """Its whole ``/usr`` (``BASE_USR``)."""
    usr_dirs: list[str]
    """Every directory of its ``/usr`` (``USR_DIRS``), named in ``usr_names``."""
    usr_names: list[str]
    usr_links: list[str]
    """Name, target, ... of the symlinks in its ``/usr`` (``USR_LINKS``)."""
    links: list[str]
    """Name, target, ... of its top-level symlinks (``BASE_LINKS``)."""


def base_views(layout: BaseLayout, views: Sequence[tuple[Path, str]]) -> BaseViews:
    """The read-only views of ``layout``'s base, mounted from its idmapped ``views``."""
    result = BaseViews([], [], [], [], [], [], [])
    for name, target in layout.top:
        if target is not None:
            result.whole.extend(["--symlink", target, f"/{name}"])
            result.links.extend([name, target])
            continue
        shown = idmapped(layout.source / name, views)
        result.whole.extend(["--ro-bind", shown, f"/{name}"])
        if name != "usr":
            result.dirs.extend(["--ro-bind", shown, f"/{name}"])
            continue
        result.usr.extend(["--ro-bind", shown, "/usr"])
        for part, part_target in layout.usr:
            if part_target is not None:
                result.usr_links.extend([part, part_target])
            else:
                result.usr_names.append(part)
                part_view = idmapped(layout.source / "usr" / part, views)
                result.usr_dirs.extend(["--ro-bind", part_view, f"/usr/{part}"])
    return result


def system_args() -> list[str]:
    """What every process of the sandbox gets: ``/proc`` (its ``sys`` read-only),
    ``/dev``, the kept capabilities, the seccomp filter on fd 10, a clean environment."""
    system = [
        "--proc", "/proc", "--ro-bind", "/proc/sys", "/proc/sys",
        "--ro-bind-try", "/proc/sysrq-trigger", "/proc/sysrq-trigger", "--dev", "/dev",
        "--die-with-parent", "--chdir", "/root", "--cap-drop", "ALL",
    ]  # fmt: skip
    for capability in KEPT_CAPABILITIES:
        system += ["--cap-add", capability]
    return [*system, "--seccomp", "10", "--unsetenv", "PWD", "--unsetenv", "OLDPWD"]


def control_values(
    root: str,
    layout: BaseLayout,
    views: Sequence[tuple[Path, str]],
    *,
    pin_base_dirs: bool,
    scratch: str,
    seccomp: str,
) -> dict[str, str | list[str]]:
    """The control loop's fixed values and bwrap arguments, by the name the loop reads.

    ``root`` is the agent's tree on the host; ``pin_base_dirs`` (a full-root base) makes
    the base's top-level directories mount points in the agent's view, as ``/etc``
    always is, so that none can be renamed away.
    """
    shown = base_views(layout, views)
    protect: list[str] = []
    for name in layout.protected_etc:
        protect += ["--ro-bind", str(Path(root) / "etc" / name), f"/etc/{name}"]
    head = ["bwrap", "--pidns", "9", "--unshare-cgroup-try"]
    pinned = ["--bind", root, "/"]
    for name in ("etc", *(layout.directories if pin_base_dirs else ())):
        pinned += ["--bind", str(Path(root) / name), f"/{name}"]
    holder = [
        "bwrap", *shown.whole, "--unshare-pid", "--unshare-net", "--unshare-ipc",
        "--unshare-uts", "--unshare-cgroup-try", "--hostname", "sandbox", "--die-with-parent",
    ]  # fmt: skip
    system = system_args()
    return {
        "ROOT": root,
        "SCRATCH": scratch,
        "SECCOMP": seccomp,
        "HOLDER": holder,
        "AGENT": head + pinned + protect + system,
        "JUDGE": head,
        "BASE_DIRS": shown.dirs,
        "BASE_USR": shown.usr,
        "USR_DIRS": shown.usr_dirs,
        "USR_NAMES": shown.usr_names,
        "USR_LINKS": shown.usr_links,
        "BASE_LINKS": shown.links,
        "PROTECT": protect + system + ["--setenv", "PATH", JUDGE_PATH],
    }


def control_assignments(values: Mapping[str, str | list[str]]) -> str:
    """``values`` as bash assignments, a list as an array.

    >>> print(control_assignments({"ROOT": "/mnt/root", "JUDGE": ["bwrap", "--pidns", "9"]}), end="")
    ROOT=/mnt/root
    JUDGE=(bwrap --pidns 9)
    """
    return "".join(
        f"{key}={shlex.quote(value)}\n"
        if isinstance(value, str)
        else f"{key}=({shlex.join(value)})\n"
        for key, value in values.items()
    )


@functools.cache
def control_loop_script() -> str:
    """The text of :data:`CONTROL_LOOP`."""
    package = resources.files(__name__.rpartition(".")[0])
    return package.joinpath(CONTROL_LOOP).read_text(encoding="utf-8")


def launch_argv(
    *,
    mnt: str,
    overlays: Sequence[Layer],
    procs_files: Sequence[str | os.PathLike[str]],
    disk_bytes: int,
    idmap_helper: Sequence[str],
    control: Sequence[str],
) -> list[str]:
    """The launcher: the pty's slave arrives as stderr (dash reads one-digit fds only)
    and leaves as fd 3; it joins the cgroups of ``procs_files``, mounts the tmpfs at
    ``mnt``, the idmapped views (``idmap_helper``, which prints the user namespace's
    keeper) and the overlays, then ``exec``s ``control`` with that keeper's pid.

    Overlay options name their layers relative to the tmpfs (``lowerdir=l0``), so the
    sandbox's mount table shows no host path.
    """
    owner = f"{idmap.ID_BASE}:{idmap.ID_BASE}"
    lines = ["set -e"]
    lines += [f"echo $$ > {shlex.quote(str(path))}" for path in procs_files]
    lines.append(f"mount -t tmpfs -o size={disk_bytes},mode=755 agentgym-os {shlex.quote(mnt)}")
    lines.append(f"cd {shlex.quote(mnt)}")
    uppers = " ".join(f"upper{i}" for i in range(len(overlays)))
    works = " ".join(f"work{i}" for i in range(len(overlays)))
    lowers = " ".join(lower for _, _, lower in overlays)
    lines.append(f"mkdir root {lowers} {uppers} {works}")
    lines.append(f"chown {owner} {uppers}")  # the overlays' directories are the sandbox root's
    pairs = shlex.join(word for _, host, lower in overlays for word in (str(host), lower))
    lines.append(f"USERNS=$({shlex.join(idmap_helper)} {pairs})")
    for i, (target, _, lower) in enumerate(overlays):
        lines.append(
            f"mount -t overlay overlay -o lowerdir={lower},upperdir=upper{i},workdir=work{i} "
            f"root{'/' + target if target else ''}"
        )
    # an empty ld.so.preload, so that it can be a read-only mount like the others
    lines.append(
        "[ -e root/etc/ld.so.preload ] || "
        f"{{ : > root/etc/ld.so.preload; chown {owner} root/etc/ld.so.preload; }}"
    )
    # a check's output goes to a tmpfs of its own: on the episode's one, an agent that
    # filled its disk made every write of a check fail, and `grep -q` whose error
    # message cannot be written exits 0: a check that should fail passed
    lines.append(
        f"mkdir judge && mount -t tmpfs -o size={JUDGE_SCRATCH_BYTES},mode=700 agentgym-judge judge"
    )
    lines.append(": > judge/scratch")
    lines.append("exec 3<&2 2>/dev/null")
    lines.append("cd /")
    lines.append("exec " + shlex.join(control) + ' "$USERNS"')
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", "\n".join(lines)]


def _parent(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def seccomp_file() -> Path:
    """The filter program for this machine, written once under the cache directory."""
    program = seccomp.filter_program()
    target = rootfs.BASE_CACHE / f"seccomp-{hashlib.sha256(program).hexdigest()[:12]}.bpf"
    if not target.exists():
        rootfs.BASE_CACHE.mkdir(parents=True, exist_ok=True)
        staging = target.with_suffix(f".{os.getpid()}.tmp")
        staging.write_bytes(program)
        staging.rename(target)
    return target


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


_remove_leftovers_once = once_per_process(cgroups.remove_leftovers)
