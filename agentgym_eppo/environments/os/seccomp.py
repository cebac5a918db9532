"""The bubblewrap sandbox's syscall filter, a small cBPF program written here.

In the spirit of Docker's default seccomp profile: the sandbox's root keeps the
capabilities that tasks need (``chown``, ``useradd``, ``kill``...), so the calls that
reach past the sandbox whatever the capabilities say are refused with ``EPERM``:

- the kernel keyring (``add_key``, ``request_key``, ``keyctl``): keys are not
  namespaced, a key added inside landed in the host root's keyring;
- new namespaces (``unshare``, ``setns``, ``clone`` with a ``CLONE_NEW*`` flag): no
  ``unshare -Ur`` to regain every capability in a user namespace;
- ``ptrace``, ``process_vm_readv``/``writev``, ``kcmp``, ``userfaultfd``;
- kernel modules, ``kexec``, ``bpf``, ``perf_event_open``, ``syslog``, ``io_uring``;
- the mount family (``mount``, ``umount2``, ``pivot_root``, the new mount API);
- clocks, swap, reboot, ``acct``, ``quotactl``, ``iopl``/``ioperm``,
  ``open_by_handle_at`` and obsolete calls.

``clone3`` answers ``ENOSYS`` (its flags sit in memory a filter cannot read), so the C
library falls back to ``clone``, whose flags are checked. Calls of another ABI than the
native one (32-bit ``int 0x80`` or x32 on x86-64) are refused. Docker differs: it allows
``ptrace`` on kernels from 4.8, and the 32-bit ABI; see docs/os.md.
"""

from __future__ import annotations

import platform
import struct

# struct seccomp_data: int nr; u32 arch; u64 instruction_pointer; u64 args[6]
_NR, _ARCH, _ARG0_LOW = 0, 4, 16
_LD_ABS, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
_ALLOW = 0x7FFF0000
_ERRNO = 0x00050000
EPERM, ENOSYS = 1, 38
X32_BIT = 0x40000000
CLONE_NAMESPACE_FLAGS = (
    0x00020000  # CLONE_NEWNS
    | 0x02000000  # CLONE_NEWCGROUP
    | 0x04000000  # CLONE_NEWUTS
    | 0x08000000  # CLONE_NEWIPC
    | 0x10000000  # CLONE_NEWUSER
    | 0x20000000  # CLONE_NEWPID
    | 0x40000000  # CLONE_NEWNET
)

DENIED = (
    "add_key", "request_key", "keyctl",
    "unshare", "setns",
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "userfaultfd",
    "init_module", "finit_module", "delete_module", "create_module", "get_kernel_syms",
    "query_module", "kexec_load", "kexec_file_load", "bpf", "perf_event_open", "syslog",
    "io_uring_setup", "io_uring_enter", "io_uring_register",
    "mount", "umount2", "pivot_root", "open_tree", "move_mount", "fsopen", "fsconfig",
    "fsmount", "fspick", "mount_setattr",
    "settimeofday", "clock_settime", "swapon", "swapoff", "reboot", "acct", "quotactl",
    "quotactl_fd", "iopl", "ioperm", "open_by_handle_at", "fanotify_init", "lookup_dcookie",
    "nfsservctl", "uselib", "vhangup", "sysfs", "_sysctl", "afs_syscall", "tuxcall",
    "security", "vserver", "getpmsg", "putpmsg",
)  # fmt: skip
"""Refused with EPERM (names the architecture lacks are skipped)."""

X86_64 = {
    "clone": 56, "clone3": 435, "ptrace": 101, "syslog": 103, "uselib": 134, "sysfs": 139,
    "vhangup": 153, "pivot_root": 155, "_sysctl": 156, "acct": 163, "settimeofday": 164,
    "mount": 165, "umount2": 166, "swapon": 167, "swapoff": 168, "reboot": 169, "iopl": 172,
    "ioperm": 173, "create_module": 174, "init_module": 175, "delete_module": 176,
    "get_kernel_syms": 177, "query_module": 178, "quotactl": 179, "nfsservctl": 180,
    "getpmsg": 181, "putpmsg": 182, "afs_syscall": 183, "tuxcall": 184, "security": 185,
    "lookup_dcookie": 212, "clock_settime": 227, "vserver": 236, "kexec_load": 246,
    "add_key": 248, "request_key": 249, "keyctl": 250, "unshare": 272,
    "perf_event_open": 298, "fanotify_init": 300, "open_by_handle_at": 304, "setns": 308,
    "process_vm_readv": 310, "process_vm_writev": 311, "kcmp": 312, "finit_module": 313,
    "kexec_file_load": 320, "bpf": 321, "userfaultfd": 323, "io_uring_setup": 425,
    "io_uring_enter": 426, "io_uring_register": 427, "open_tree": 428, "move_mount": 429,
    "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433, "mount_setattr": 442,
    "quotactl_fd": 443,
}  # fmt: skip

AARCH64 = {
    "clone": 220, "clone3": 435, "ptrace": 117, "syslog": 116, "vhangup": 58,
    "pivot_root": 41, "acct": 89, "settimeofday": 170, "mount": 40, "umount2": 39,
    "swapon": 224, "swapoff": 225, "reboot": 142, "init_module": 105, "delete_module": 106,
    "quotactl": 60, "nfsservctl": 42, "lookup_dcookie": 18, "clock_settime": 112,
    "kexec_load": 104, "add_key": 217, "request_key": 218, "keyctl": 219, "unshare": 97,
    "perf_event_open": 241, "fanotify_init": 262, "open_by_handle_at": 265, "setns": 268,
    "process_vm_readv": 270, "process_vm_writev": 271, "kcmp": 272, "finit_module": 273,
    "kexec_file_load": 294, "bpf": 280, "userfaultfd": 282, "io_uring_setup": 425,
    "io_uring_enter": 426, "io_uring_register": 427, "open_tree": 428, "move_mount": 429,
    "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433, "mount_setattr": 442,
    "quotactl_fd": 443,
}  # fmt: skip

ARCHITECTURES: dict[str, tuple[int, dict[str, int]]] = {
    "x86_64": (0xC000003E, X86_64),  # AUDIT_ARCH_X86_64
    "aarch64": (0xC00000B7, AARCH64),  # AUDIT_ARCH_AARCH64
}
"""``platform.machine()`` -> (audit architecture, syscall numbers)."""


class UnsupportedArchitecture(RuntimeError):
    """No syscall table for this machine: the filter cannot be built."""


def filter_program(machine: str | None = None) -> bytes:
    """The filter as raw ``struct sock_filter`` entries (what ``bwrap --seccomp`` reads)."""
    machine = machine or platform.machine()
    if machine not in ARCHITECTURES:
        raise UnsupportedArchitecture(
            f"no seccomp syscall table for {machine!r} (known: {', '.join(ARCHITECTURES)}); "
            "add one to environments/os/seccomp.py"
        )
    audit_arch, numbers = ARCHITECTURES[machine]
    denied = sorted({numbers[name] for name in DENIED if name in numbers})
    # Each entry: (code, k, jump-if-true label or None, jump-if-false label or None)
    program: list[tuple[int, int, str | None, str | None]] = [
        (_LD_ABS, _ARCH, None, None),
        (_JEQ, audit_arch, None, "deny"),
        (_LD_ABS, _NR, None, None),
    ]
    if machine == "x86_64":
        program.append((_JGE, X32_BIT, "deny", None))
    program += [(_JEQ, number, "deny", None) for number in denied]
    program += [
        (_JEQ, numbers["clone"], "clone", None),
        (_JEQ, numbers["clone3"], "enosys", None),
        (_RET, _ALLOW, None, None),
    ]
    labels = {"clone": len(program)}
    program += [
        (_LD_ABS, _ARG0_LOW, None, None),
        (_JSET, CLONE_NAMESPACE_FLAGS, "deny", None),
        (_RET, _ALLOW, None, None),
    ]
    labels["deny"] = len(program)
    program.append((_RET, _ERRNO | EPERM, None, None))
    labels["enosys"] = len(program)
    program.append((_RET, _ERRNO | ENOSYS, None, None))

    def offset(index: int, label: str | None) -> int:
        if label is None:
            return 0
        jump = labels[label] - index - 1
        if not 0 <= jump < 256:
            raise AssertionError(f"seccomp jump of {jump} does not fit in 8 bits")
        return jump

    return b"".join(
        struct.pack("<HBBI", code, offset(index, true), offset(index, false), k)
        for index, (code, k, true, false) in enumerate(program)
    )
