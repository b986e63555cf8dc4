"""The seccomp filter bubblewrap loads before a command starts: no setuid or setgid bits.

Started by root, a confined command writes files as root on the host (its user namespace
maps it there), so a setuid bit it set would make a root program for every local user.
The filter refuses any mode with those bits (chmod, creating a file or node) with EPERM,
and the calls it cannot inspect (openat2's mode lives in a struct, io_uring runs calls the
filter never sees) with ENOSYS, which programs answer by falling back to plain calls.
"""

from __future__ import annotations

import errno
import platform
import struct

# Classic BPF over struct seccomp_data: nr at 0, arch at 4, args[i] at 16 + 8 i (the low
# half first on these little-endian machines).
_LOAD = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_JSET = 0x45  # BPF_JMP | BPF_JSET | BPF_K
_RET = 0x06  # BPF_RET | BPF_K
_ALLOW = 0x7FFF0000
_ERRNO = 0x00050000
_X32_BIT = 0x40000000

SETID_BITS = 0o6000
CREATING = 0o100 | 0o20000000  # O_CREAT | __O_TMPFILE: only then does open read its mode

# Per machine: its audit arch; (syscall, mode argument, flags argument or None) for the
# calls that set a mode; the calls refused outright.
_TABLES: dict[str, tuple[int, list[tuple[int, int, int | None]], list[int]]] = {
    "x86_64": (
        0xC000003E,
        [
            (2, 2, 1),  # open
            (85, 1, None),  # creat
            (257, 3, 2),  # openat
            (90, 1, None),  # chmod
            (91, 1, None),  # fchmod
            (268, 2, None),  # fchmodat
            (452, 2, None),  # fchmodat2
            (133, 1, None),  # mknod
            (259, 2, None),  # mknodat
        ],
        [437, 425, 426, 427],  # openat2, io_uring_setup, io_uring_enter, io_uring_register
    ),
    "aarch64": (
        0xC00000B7,
        [
            (56, 3, 2),  # openat
            (52, 1, None),  # fchmod
            (53, 2, None),  # fchmodat
            (452, 2, None),  # fchmodat2
            (33, 2, None),  # mknodat
        ],
        [437, 425, 426, 427],
    ),
}

Instruction = tuple[int, int, int, int]


def _arg(index: int) -> Instruction:
    return (_LOAD, 0, 0, 16 + 8 * index)


def _mode_check(mode: int, flags: int | None) -> list[Instruction]:
    """Refuse when the mode has a set-id bit (and, for open, only when it creates)."""
    block: list[Instruction] = []
    if flags is not None:
        block += [_arg(flags), (_JSET, 0, 3, CREATING)]
    block += [_arg(mode), (_JSET, 0, 1, SETID_BITS)]
    block += [(_RET, 0, 0, _ERRNO | errno.EPERM), (_RET, 0, 0, _ALLOW)]
    return block


def setid_filter(machine: str | None = None) -> bytes | None:
    """The compiled filter for this machine, or None where it has no table."""
    table = _TABLES.get(machine or platform.machine())
    if table is None:
        return None
    arch, mode_calls, refused = table
    enosys = (_RET, 0, 0, _ERRNO | errno.ENOSYS)
    program: list[Instruction] = [(_LOAD, 0, 0, 4), (_JEQ, 1, 0, arch), enosys, (_LOAD, 0, 0, 0)]
    program += [(_JGE, 0, 1, _X32_BIT), enosys]  # another ABI's numbering (x32)
    for number in refused:
        program += [(_JEQ, 0, 1, number), enosys]
    for number, mode, flags in mode_calls:
        block = _mode_check(mode, flags)
        program += [(_JEQ, 0, len(block), number), *block]
    program.append((_RET, 0, 0, _ALLOW))
    return b"".join(struct.pack("<HBBI", *instruction) for instruction in program)
