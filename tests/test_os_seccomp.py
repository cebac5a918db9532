"""The bubblewrap sandbox's seccomp filter: its syscall numbers agree with libseccomp's
tables, and the program it builds refuses what it says and allows the rest."""

from __future__ import annotations

import ctypes
import ctypes.util
import struct

import pytest

from agentgym_eppo.environments.os import seccomp

AUDIT_ARCH_I386 = 0x40000003


def libseccomp() -> ctypes.CDLL:
    name = ctypes.util.find_library("seccomp")
    if name is None:
        pytest.skip("libseccomp is not installed (apt-get install libseccomp2)")
    library = ctypes.CDLL(name)
    library.seccomp_syscall_resolve_name_arch.argtypes = [ctypes.c_uint32, ctypes.c_char_p]
    return library


@pytest.mark.parametrize("machine", sorted(seccomp.ARCHITECTURES))
def test_syscall_numbers_match_libseccomp(machine: str) -> None:
    library = libseccomp()
    audit_arch, numbers = seccomp.ARCHITECTURES[machine]
    for name, number in numbers.items():
        resolved = library.seccomp_syscall_resolve_name_arch(audit_arch, name.encode())
        assert resolved == number, (machine, name, resolved)


def run(program: bytes, nr: int, arch: int, arg0: int = 0) -> int:
    """A tiny classic-BPF interpreter for the instructions the filter uses."""
    data = struct.pack("<iIQ6Q", nr, arch, 0, arg0, 0, 0, 0, 0, 0)
    insns = [struct.unpack_from("<HBBI", program, i) for i in range(0, len(program), 8)]
    pc, acc = 0, 0
    while True:
        code, jt, jf, k = insns[pc]
        if code == 0x20:
            acc = struct.unpack_from("<I", data, k)[0]
            pc += 1
        elif code in (0x15, 0x35, 0x45):
            taken = {0x15: acc == k, 0x35: acc >= k, 0x45: bool(acc & k)}[code]
            pc += 1 + (jt if taken else jf)
        elif code == 0x06:
            return k
        else:
            raise AssertionError(f"unexpected instruction {code:#x}")


@pytest.mark.parametrize("machine", sorted(seccomp.ARCHITECTURES))
def test_the_program_refuses_the_listed_calls_and_allows_others(machine: str) -> None:
    program = seccomp.filter_program(machine)
    arch, numbers = seccomp.ARCHITECTURES[machine]
    eperm = 0x00050000 | seccomp.EPERM
    for name in seccomp.DENIED:
        if name in numbers:
            assert run(program, numbers[name], arch) == eperm, name
    allow = 0x7FFF0000
    assert run(program, 0, arch) == allow  # read / io_setup
    assert run(program, numbers["clone"], arch, arg0=0x01200011) == allow  # fork's flags
    assert run(program, numbers["clone"], arch, arg0=0x10000000) == eperm  # CLONE_NEWUSER
    assert run(program, numbers["clone3"], arch) == 0x00050000 | seccomp.ENOSYS
    assert run(program, 0, AUDIT_ARCH_I386) == eperm  # another ABI
    if machine == "x86_64":
        assert run(program, seccomp.X32_BIT | 1, arch) == eperm


def test_an_unknown_machine_is_a_clear_error() -> None:
    with pytest.raises(seccomp.UnsupportedArchitecture, match=r"riscv64.*known: x86_64"):
        seccomp.filter_program("riscv64")
