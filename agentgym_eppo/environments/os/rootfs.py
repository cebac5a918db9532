"""The read-only base a bubblewrap sandbox sees: the host's programs, none of its data.

The base is the host's ``/usr`` (and ``/bin``, ``/lib``... which are links to it or
directories beside it) plus a small generated tree for everything else: an ``/etc``
holding only system configuration copied from the host (the loader cache, PAM, the
alternatives links, useradd's defaults) with a fixed Debian set of users and groups in
place of the host's, and empty ``/root``, ``/home``, ``/tmp``, ``/var``. No home
directory, project checkout or host secret is in it. The tree is built once per host
and content version, atomically, under :data:`BASE_CACHE`.

A user may instead pass a full root filesystem (e.g. the debootstrap tree the Docker
image is built from); then that directory is the only lower layer.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path

BASE_CACHE = Path(os.environ.get("AGENTGYM_OS_CACHE", "/var/tmp/agentgym-eppo-os"))

HOST_TOP_LEVEL = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32")
"""Host directories shown read-only (through a per-episode overlay) when they exist."""

ETC_FROM_HOST = (
    "alternatives", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "pam.d", "pam.conf",
    "security", "login.defs", "default", "skel", "bash.bashrc", "profile", "shells",
    "nsswitch.conf", "localtime", "timezone", "debian_version", "os-release", "issue",
    "environment", "mime.types", "magic", "magic.mime", "adduser.conf", "deluser.conf",
    "inputrc", "libaudit.conf", "host.conf", "gai.conf", "mke2fs.conf", "subuid", "subgid",
)  # fmt: skip
"""System configuration the tools need; nothing that holds host data or credentials."""

USERS = (
    "root:x:0:0:root:/root:/bin/bash",
    "daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin",
    "bin:x:2:2:bin:/bin:/usr/sbin/nologin",
    "sys:x:3:3:sys:/dev:/usr/sbin/nologin",
    "sync:x:4:65534:sync:/bin:/bin/sync",
    "games:x:5:60:games:/usr/games:/usr/sbin/nologin",
    "man:x:6:12:man:/var/cache/man:/usr/sbin/nologin",
    "lp:x:7:7:lp:/var/spool/lpd:/usr/sbin/nologin",
    "mail:x:8:8:mail:/var/mail:/usr/sbin/nologin",
    "news:x:9:9:news:/var/spool/news:/usr/sbin/nologin",
    "uucp:x:10:10:uucp:/var/spool/uucp:/usr/sbin/nologin",
    "proxy:x:13:13:proxy:/bin:/usr/sbin/nologin",
    "www-data:x:33:33:www-data:/var/www:/usr/sbin/nologin",
    "backup:x:34:34:backup:/var/backups:/usr/sbin/nologin",
    "list:x:38:38:Mailing List Manager:/var/list:/usr/sbin/nologin",
    "irc:x:39:39:ircd:/run/ircd:/usr/sbin/nologin",
    "_apt:x:42:65534::/nonexistent:/usr/sbin/nologin",
    "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin",
)
"""Debian 12's base-passwd users, so user-counting tasks have the same answer everywhere."""

GROUPS = (
    "root:x:0:", "daemon:x:1:", "bin:x:2:", "sys:x:3:", "adm:x:4:", "tty:x:5:", "disk:x:6:",
    "lp:x:7:", "mail:x:8:", "news:x:9:", "uucp:x:10:", "man:x:12:", "proxy:x:13:",
    "kmem:x:15:", "dialout:x:20:", "fax:x:21:", "voice:x:22:", "cdrom:x:24:", "floppy:x:25:",
    "tape:x:26:", "sudo:x:27:", "audio:x:29:", "dip:x:30:", "www-data:x:33:", "backup:x:34:",
    "operator:x:37:", "list:x:38:", "irc:x:39:", "src:x:40:", "shadow:x:42:", "utmp:x:43:",
    "video:x:44:", "sasl:x:45:", "plugdev:x:46:", "staff:x:50:", "games:x:60:",
    "users:x:100:", "nogroup:x:65534:",
)  # fmt: skip

EMPTY_DIRS = (
    "root", "home", "tmp", "var/tmp", "var/log", "var/lib", "var/cache", "var/mail",
    "var/spool", "var/backups", "run", "run/.agentgym", "mnt", "opt", "srv", "media", "dev", "proc", "sys",
)  # fmt: skip

_VERSION = "2"  # 2: /etc/python3* (the interpreter's sitecustomize lives there)


def host_base() -> Path:
    """The generated part of the base (built on first use); see the module docstring."""
    key = hashlib.sha256(
        "\n".join((_VERSION, *ETC_FROM_HOST, *USERS, *GROUPS, *EMPTY_DIRS)).encode()
    ).hexdigest()[:12]
    target = BASE_CACHE / f"base-{key}"
    if target.is_dir():
        return target
    BASE_CACHE.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix="staging-", dir=BASE_CACHE))
    try:
        _build(staging)
        try:
            staging.rename(target)
        except OSError:  # another process built it first
            shutil.rmtree(staging, ignore_errors=True)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return target


def _build(root: Path) -> None:
    root.chmod(0o755)
    for name in EMPTY_DIRS:
        (root / name).mkdir(parents=True, exist_ok=True)
    (root / "root").chmod(0o700)
    (root / "run/.agentgym").chmod(0o700)  # the control loop's scratch space
    (root / "tmp").chmod(0o1777)
    (root / "var/tmp").chmod(0o1777)
    for name in HOST_TOP_LEVEL:
        host = Path("/") / name
        if host.is_symlink():
            (root / name).symlink_to(os.readlink(host))
        elif host.is_dir():
            (root / name).mkdir()
    etc = root / "etc"
    etc.mkdir()
    python_config = sorted(path.name for path in Path("/etc").glob("python3*"))
    for name in (*ETC_FROM_HOST, *python_config):
        source = Path("/etc") / name
        if source.is_symlink():
            (etc / name).symlink_to(os.readlink(source))
        elif source.is_dir():
            shutil.copytree(source, etc / name, symlinks=True)
        elif source.is_file():
            shutil.copy2(source, etc / name)
    _write(etc / "passwd", USERS)
    _write(etc / "group", GROUPS)
    _write(etc / "shadow", [f"{line.split(':')[0]}:*:19000:0:99999:7:::" for line in USERS], 0o640)
    _write(etc / "gshadow", [f"{line.split(':')[0]}:*::" for line in GROUPS], 0o640)
    _write(etc / "hostname", ["sandbox"])
    _write(etc / "hosts", ["127.0.0.1\tlocalhost sandbox", "::1\tlocalhost ip6-localhost"])
    _write(etc / "resolv.conf", [])
    _write(etc / "fstab", [])
    (etc / "mtab").symlink_to("../proc/self/mounts")
    for name in (".bashrc", ".profile"):
        skeleton = etc / "skel" / name
        if skeleton.is_file():
            shutil.copy2(skeleton, root / "root" / name)


def _write(path: Path, lines: list[str] | tuple[str, ...], mode: int = 0o644) -> None:
    path.write_text("".join(line + "\n" for line in lines))
    path.chmod(mode)
