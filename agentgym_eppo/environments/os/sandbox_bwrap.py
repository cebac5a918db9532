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
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import hashlib
import itertools
import os
import select
import shlex
import shutil
import subprocess
import sys
import termios
import threading
import time
import weakref
from collections.abc import Sequence
from pathlib import Path

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

CONTROL_LOOP = r"""
exec 2>/dev/null
LC_ALL=C
unset OLDPWD  # the launcher's host directory, else visible in /proc/1/environ
ulimit -f "$1"
userns=$2  # a process that keeps the sandbox's user namespace until the holder is in it
exec 5< <(exec nsenter -t "$userns" --user -- "${HOLDER[@]}" --info-fd 6 -- sleep infinity 6>&1 >/dev/null </dev/null 3>&-)
holder=
while IFS= read -r -u 5 info; do
    if [[ $info =~ \"child-pid\":\ *([0-9]+) ]]; then holder=${BASH_REMATCH[1]}; break; fi
done  # fd 5 stays open: bwrap gets SIGPIPE if it writes to a closed pipe
kill -9 "$userns"  # the holder keeps the namespace now (it dies with this loop; that does not)
[ -n "$holder" ] || exit 1
# the exit nonce is the first line the wrapper reads from the terminal: on no command line
WRAP='IFS= read -r n; bash --login --noediting -i; printf "\036%s\036exit\036\n" "$n"'
judge_view() {  # the agent's processes are stopped meanwhile: nothing moves under it
    VIEW=(--bind "$ROOT" / "${BASE_DIRS[@]}")
    local i name target whole=
    # the agent's /usr under every directory of the base's /usr (local too: a .pth file
    # or sitecustomize in local/lib would run in a python check), so only what the base
    # lacks shows through (/usr/stock.log, say); the base's whole /usr where the agent
    # replaced one of those directories
    for name in "${USR_NAMES[@]}"; do
        if [ -L "$ROOT/usr/$name" ] || ! [ -d "$ROOT/usr/$name" ]; then whole=1; fi
    done
    for ((i = 0; i < ${#USR_LINKS[@]}; i += 2)); do  # the base's links in /usr, unchanged
        name=${USR_LINKS[i]}; target=${USR_LINKS[i + 1]}
        if ! [ -L "$ROOT/usr/$name" ] || [ "$(readlink "$ROOT/usr/$name")" != "$target" ]; then
            whole=1
        fi
    done
    if [ -L "$ROOT/usr" ] || ! [ -d "$ROOT/usr" ]; then whole=1; fi
    if [ -n "$whole" ]; then VIEW+=("${BASE_USR[@]}"); else VIEW+=("${USR_DIRS[@]}"); fi
    for ((i = 0; i < ${#BASE_LINKS[@]}; i += 2)); do
        name=${BASE_LINKS[i]}; target=${BASE_LINKS[i + 1]}
        # the base's link, or bwrap fails to make it and the check fails: the agent broke it
        if ! [ -L "$ROOT/$name" ] || [ "$(readlink "$ROOT/$name")" != "$target" ]; then
            VIEW+=(--symlink "$target" "/$name")
        fi
    done
    for name in usr/local/bin usr/local/sbin; do  # no symlink on the way: it would resolve on the host
        if [ -d "$ROOT/$name" ] && ! [ -L "$ROOT/usr" ] && ! [ -L "$ROOT/usr/local" ] && ! [ -L "$ROOT/$name" ]; then
            VIEW+=(--bind "$ROOT/$name" "/$name")
        fi
    done
}
while IFS= read -r line; do
    eval "words=($line)"
    id=${words[0]}; request=${words[1]}
    case $request in
    shell)
        # what was typed to a shell that had died (a command sent before its death was
        # seen) is still queued on the terminal: the new wrapper would read it first
        while read -r -t 0.05 -u 3 _; do :; done
        nsenter -t "$holder" --user --net --ipc --uts -- "${AGENT[@]}" -- \
            bash -c 'exec 9<&-; exec setsid -c env --default-signal=INT,QUIT bash -c "$1" "$0"' \
            wrap "$WRAP" 9<"/proc/$holder/ns/pid" 10<"$SECCOMP" <&3 >&3 2>&3 3>&- 5<&- &
        printf '%s 0 0\n' "$id" ;;
    run)
        judge_view
        nsenter -t "$holder" --user --net --ipc --uts -- "${JUDGE[@]}" "${VIEW[@]}" "${PROTECT[@]}" -- \
            bash -c 'exec 9<&-; exec timeout -s KILL "$@"' judge "${words[2]}" "${words[@]:3}" \
            9<"/proc/$holder/ns/pid" 10<"$SECCOMP" </dev/null >"$SCRATCH" 2>&1 3>&- 5<&-
        rc=$?
        out=
        IFS= read -r -d '' -N 1048576 out <"$SCRATCH"
        : >"$SCRATCH"
        printf '%s %s %s\n%s' "$id" "$rc" "${#out}" "$out" ;;
    esac
done
"""

_counter = itertools.count()
_leftovers_lock = threading.Lock()
_open_sandboxes: weakref.WeakSet[BwrapSandbox] = weakref.WeakSet()


@atexit.register
def _close_open_sandboxes() -> None:
    """Tear down what is still open when Python exits, before the interpreter finalizes
    (a sandbox an exception's traceback kept alive would else close in ``__del__`` while
    modules and threads are being torn down)."""
    for sandbox in list(_open_sandboxes):
        sandbox.close()
    cgroups.finish_late_removals(timeout=5.0)


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
        self._starting: int | None = self._send(["shell"])
        if wait:
            self.ensure_ready()

    def _launch_argv(self, root_dir: str | os.PathLike[str] | None) -> list[str]:
        """The launcher: the pty's slave arrives as stderr (dash reads one-digit fds only)
        and leaves as fd 3.

        Overlay options name their layers relative to the tmpfs (``lowerdir=l0``), so the
        sandbox's mount table shows no host path.
        """
        MOUNT_DIR.mkdir(parents=True, exist_ok=True)
        mnt = str(MOUNT_DIR)
        base = Path(root_dir) if root_dir is not None else rootfs.host_base()
        # (mount point under root, host directory, its idmapped view under the tmpfs):
        # the base, then host directories over it
        overlays: list[tuple[str, Path, str]] = [("", base, "l0")]
        if root_dir is None:
            overlays += [
                (name, Path("/") / name, f"lower{i}")
                for i, name in enumerate(rootfs.HOST_TOP_LEVEL, start=1)
                if (Path("/") / name).is_dir() and not (Path("/") / name).is_symlink()
            ]
        owner = f"{idmap.ID_BASE}:{idmap.ID_BASE}"
        lines = ["set -e"]
        lines += [f"echo $$ > {shlex.quote(path)}" for path in self._cgroup.procs_files]
        lines.append(
            f"mount -t tmpfs -o size={self.limits.disk_bytes},mode=755 agentgym-os {shlex.quote(mnt)}"
        )
        lines.append(f"cd {shlex.quote(mnt)}")
        uppers = " ".join(f"upper{i}" for i in range(len(overlays)))
        works = " ".join(f"work{i}" for i in range(len(overlays)))
        lowers = " ".join(lower for _, _, lower in overlays)
        lines.append(f"mkdir root {lowers} {uppers} {works}")
        lines.append(f"chown {owner} {uppers}")  # the overlays' directories are the sandbox root's
        pairs = shlex.join(word for _, host, lower in overlays for word in (str(host), lower))
        helper = shlex.join([sys.executable, "-I", "-S", idmap.__file__])
        lines.append(f"USERNS=$({helper} {pairs})")
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
        views = [(host, f"{mnt}/{lower}") for _, host, lower in overlays]
        arrays = self._control_arrays(f"{mnt}/root", base, root_dir is not None, views)
        script = arrays + CONTROL_LOOP
        control = ["bash", "--noprofile", "--norc", "-c", script, "control"]
        control += [str(max(1, self.limits.file_size_bytes // 1024))]
        lines.append("exec " + shlex.join(control) + ' "$USERNS"')
        return ["unshare", "--mount", "--propagation", "private", "sh", "-c", "\n".join(lines)]

    def _control_arrays(
        self, root: str, base: Path, full_root: bool, views: Sequence[tuple[Path, str]]
    ) -> str:
        """The control loop's fixed bwrap arguments, as bash assignments. ``views``: each
        host directory of the base and where its idmapped view is mounted."""

        def shown(path: Path) -> str:
            """Where the sandbox sees the base's ``path``: through its idmapped view."""
            for host, view in views:
                if path == host or host in path.parents:
                    return str(Path(view) / path.relative_to(host))
            raise ValueError(f"{path} is in no layer of the base")

        layout_source = base if full_root else Path("/")
        base_view: list[str] = []  # the base's programs, read-only
        base_dirs: list[str] = []  # all but usr, which the judge view mounts by its parts
        base_usr: list[str] = []
        usr_dirs: list[str] = []
        usr_names: list[str] = []
        usr_links: list[str] = []
        base_links: list[str] = []
        for name in rootfs.HOST_TOP_LEVEL:
            path = layout_source / name
            if path.is_symlink():
                base_view += ["--symlink", os.readlink(path), f"/{name}"]
                base_links += [name, os.readlink(path)]
            elif path.is_dir():
                base_view += ["--ro-bind", shown(path), f"/{name}"]
                if name != "usr":
                    base_dirs += ["--ro-bind", shown(path), f"/{name}"]
                    continue
                base_usr += ["--ro-bind", shown(path), "/usr"]
                for part in sorted(path.iterdir()):
                    if part.is_symlink():
                        usr_links += [part.name, os.readlink(part)]
                    elif part.is_dir():
                        usr_names.append(part.name)
                        usr_dirs += ["--ro-bind", shown(part), f"/usr/{part.name}"]
        etc = Path(root) / "etc"
        base_etc = base / "etc"
        protected = [
            name for name in PROTECTED_ETC if name == "ld.so.preload" or (base_etc / name).exists()
        ]
        protected += sorted(path.name for path in base_etc.glob("python3*"))
        protect: list[str] = []
        for name in protected:
            protect += ["--ro-bind", str(etc / name), f"/etc/{name}"]
        system = [
            "--proc", "/proc", "--ro-bind", "/proc/sys", "/proc/sys",
            "--ro-bind-try", "/proc/sysrq-trigger", "/proc/sysrq-trigger", "--dev", "/dev",
            "--die-with-parent", "--chdir", "/root", "--cap-drop", "ALL",
        ]  # fmt: skip
        for capability in KEPT_CAPABILITIES:
            system += ["--cap-add", capability]
        system += ["--seccomp", "10", "--unsetenv", "PWD", "--unsetenv", "OLDPWD"]
        head = ["bwrap", "--pidns", "9", "--unshare-cgroup-try"]
        # in the agent's view /etc and the base's top-level directories are mount points
        # (which cannot be renamed away), the protected files read-only mounts
        pinned = ["--bind", root, "/"]
        for name in ("etc", *rootfs.HOST_TOP_LEVEL):
            path = Path(root) / name
            if name == "etc" or (
                full_root and (base / name).is_dir() and not (base / name).is_symlink()
            ):
                pinned += ["--bind", str(path), f"/{name}"]
        holder = [
            "bwrap", *base_view, "--unshare-pid", "--unshare-net", "--unshare-ipc",
            "--unshare-uts", "--unshare-cgroup-try", "--hostname", "sandbox", "--die-with-parent",
        ]  # fmt: skip
        assignments = {
            "ROOT": root,
            "SCRATCH": f"{MOUNT_DIR}/judge/scratch",
            "SECCOMP": str(seccomp_file()),
        }
        arrays = {
            "HOLDER": holder,
            "AGENT": head + pinned + protect + system,
            "JUDGE": head,
            "BASE_DIRS": base_dirs,
            "BASE_USR": base_usr,
            "USR_DIRS": usr_dirs,
            "USR_NAMES": usr_names,
            "USR_LINKS": usr_links,
            "BASE_LINKS": base_links,
            "PROTECT": protect + system + ["--setenv", "PATH", JUDGE_PATH],
        }
        text = "".join(f"{key}={shlex.quote(value)}\n" for key, value in assignments.items())
        text += "".join(f"{key}=({shlex.join(value)})\n" for key, value in arrays.items())
        return text

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
            if not self._holder:
                self._holder = self._find_holder(self._start_timeout)
            self.shell.setup(self._start_timeout, stty=False)
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
        can signal it)."""
        return not self._closed and self._process.poll() is None

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
        kill_repeatedly(self.process_ids)
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


def _remove_leftovers_once() -> None:
    global _leftovers_removed
    with _leftovers_lock:
        if not _leftovers_removed:
            cgroups.remove_leftovers()
            _leftovers_removed = True
