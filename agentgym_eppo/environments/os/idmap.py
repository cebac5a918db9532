"""The sandbox's user namespace: its root is an unprivileged host uid.

The embedded sandbox's processes run in a user namespace that maps its uids and gids
``0 .. ID_COUNT - 1`` to the host's ``ID_BASE .. ID_BASE + ID_COUNT - 1`` (those of
Docker's ``userns-remap`` and LXC's unprivileged containers by default): a process that
escaped every other wall would be host uid 100000, which owns nothing on the host, and
the capabilities the sandbox keeps act on that namespace's objects only. The base's files
(owned by host root) are shown through *idmapped* bind mounts (``open_tree`` and
``mount_setattr(MOUNT_ATTR_IDMAP)``, Linux 5.12; overlayfs over idmapped layers, 5.19),
so that inside they belong to the sandbox's root, as in a container whose image belongs
to it, and what the agent writes lands on the host as uid 100000 and up.

The sandbox's launcher runs this file as a script (``python -I -S idmap.py``: standard
library only, no package import) inside its mount namespace::

    idmap.py SOURCE TARGET [SOURCE TARGET ...]

It starts a ``sleep infinity`` in a new user namespace with that mapping, bind-mounts
each ``SOURCE`` on ``TARGET`` (an existing directory) idmapped through it, and prints the
sleeper's pid. The sleeper keeps the namespace until the sandbox's holder has joined it
(``nsenter --user``); the control loop then kills it, so that nothing outlives the
sandbox's ``--die-with-parent`` processes.
"""

from __future__ import annotations

import ctypes
import os
import struct
import sys

ID_BASE = 100_000
"""The host uid (and gid) of the sandbox's root."""

ID_COUNT = 65_536
"""How many uids and gids the sandbox has (0 .. 65535 inside)."""

_SYS_OPEN_TREE, _SYS_MOVE_MOUNT, _SYS_MOUNT_SETATTR = 428, 429, 442  # the same on every arch
_CLONE_NEWUSER = 0x10000000
_OPEN_TREE_CLONE, _OPEN_TREE_CLOEXEC = 1, os.O_CLOEXEC
_AT_FDCWD, _AT_EMPTY_PATH = -100, 0x1000
_MOUNT_ATTR_IDMAP, _MOVE_MOUNT_F_EMPTY_PATH = 0x00100000, 0x4

_libc = ctypes.CDLL(None, use_errno=True)


MIN_KERNEL = (5, 19)
"""Idmapped mounts came in Linux 5.12; overlayfs over idmapped layers in 5.19."""


def kernel_supported(release: str) -> bool:
    """Whether a kernel of ``release`` (``uname -r``) can build the sandbox's overlay.

    >>> kernel_supported("6.18.44-fc"), kernel_supported("5.15.0-91-generic")
    (True, False)
    """
    numbers = [int(part) for part in release.split("-")[0].split(".")[:2] if part.isdigit()]
    return tuple(numbers) >= MIN_KERNEL


def _check(result: int, what: str) -> int:
    if result < 0:
        error = ctypes.get_errno()
        raise OSError(error, f"{what}: {os.strerror(error)}")
    return result


def new_user_namespace() -> int:
    """The pid of a ``sleep infinity`` in a new user namespace with the sandbox's mapping."""
    ready_read, ready_write = os.pipe()
    go_read, go_write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: a new user namespace, then wait for its mapping
        try:
            os.close(ready_read)
            os.close(go_write)
            _check(_libc.unshare(_CLONE_NEWUSER), "unshare(CLONE_NEWUSER)")
            os.write(ready_write, b"1")
            if os.read(go_read, 1) == b"1":
                # nothing of the launcher's (its command substitution waits for EOF)
                null = os.open(os.devnull, os.O_RDWR)
                for fd in (0, 1, 2):
                    os.dup2(null, fd)
                os.closerange(3, os.sysconf("SC_OPEN_MAX"))
                os.execvp("sleep", ["sleep", "infinity"])
        finally:
            os._exit(1)
    os.close(ready_write)
    os.close(go_read)
    try:
        if os.read(ready_read, 1) != b"1":
            raise OSError("the user namespace's process did not start")
        for name in ("uid_map", "gid_map"):
            with open(f"/proc/{pid}/{name}", "w", encoding="ascii") as handle:
                handle.write(f"0 {ID_BASE} {ID_COUNT}\n")
        os.write(go_write, b"1")
    except BaseException:
        os.kill(pid, 9)
        raise
    finally:
        os.close(ready_read)
        os.close(go_write)
    return pid


def idmapped_bind(source: str, target: str, userns_fd: int) -> None:
    """Bind ``source`` (not its submounts) on ``target``, its owners shifted by the
    mapping of the user namespace ``userns_fd``."""
    tree = _check(
        _libc.syscall(
            _SYS_OPEN_TREE, _AT_FDCWD, source.encode(), _OPEN_TREE_CLONE | _OPEN_TREE_CLOEXEC
        ),
        f"open_tree {source}",
    )
    try:
        attr = ctypes.create_string_buffer(struct.pack("QQQQ", _MOUNT_ATTR_IDMAP, 0, 0, userns_fd))
        _check(
            _libc.syscall(_SYS_MOUNT_SETATTR, tree, b"", _AT_EMPTY_PATH, attr, len(attr.raw)),
            f"mount_setattr(MOUNT_ATTR_IDMAP) {source}",
        )
        _check(
            _libc.syscall(
                _SYS_MOVE_MOUNT, tree, b"", _AT_FDCWD, target.encode(), _MOVE_MOUNT_F_EMPTY_PATH
            ),
            f"move_mount {source} -> {target}",
        )
    finally:
        os.close(tree)


def main(argv: list[str]) -> int:
    if not argv or len(argv) % 2:
        print("usage: idmap.py SOURCE TARGET [SOURCE TARGET ...]", file=sys.stderr)
        return 2
    pid = new_user_namespace()
    try:
        userns = os.open(f"/proc/{pid}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
        try:
            for source, target in zip(argv[::2], argv[1::2], strict=True):
                idmapped_bind(source, target, userns)
        finally:
            os.close(userns)
    except OSError as error:
        os.kill(pid, 9)
        print(f"idmap.py: {error}", file=sys.stderr)
        return 1
    print(pid)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
