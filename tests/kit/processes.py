"""The processes alive on this machine, to prove what a test started has ended."""

from __future__ import annotations

from pathlib import Path


def live_command_lines(parent: int | None = None) -> dict[int, str]:
    """The command line of every live (not zombie) process on the machine, or of every child
    of `parent`, by pid."""
    found = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
            status = (proc / "status").read_text()
        except OSError:
            continue
        if "State:\tZ" in status or (parent is not None and f"\nPPid:\t{parent}\n" not in status):
            continue
        found[int(proc.name)] = argv
    return found
