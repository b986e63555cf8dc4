"""What one local command may use: setrlimit per process, and as root one cgroup that bounds
the processes and the memory of the command, its /tmp included, together."""

from __future__ import annotations

import contextlib
import os
import resource
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from modules.sandbox.cgroup import CgroupRoots, CommandCgroup, find_roots, reap_leftovers
from utils.settings import LocalSandboxSettings

MB = 1024 * 1024
RLIMIT_NAMES = {
    getattr(resource, name): name
    for name in ("RLIMIT_CPU", "RLIMIT_AS", "RLIMIT_FSIZE", "RLIMIT_NPROC")
}


@dataclass
class AppliedLimits:
    """The limits of one command: a preexec function for its first process, then what the
    kernel did to it."""

    preexec: Callable[[], None]
    cgroup: CommandCgroup | None
    memory_mb: int

    def note(self) -> str:
        """What the command should be told about a limit it hit, or ""."""
        kills, own_limit = (0, False) if self.cgroup is None else self.cgroup.out_of_memory()
        return memory_note(kills, own_limit, self.memory_mb) if kills else ""


def memory_note(kills: int, own_limit: bool, memory_mb: int, session: bool = False) -> str:
    """The line a command's result ends with when `kills` processes were killed for memory
    while it ran (of the command, or with `session` of its conversation's session): by the
    sandbox's own limit (`own_limit`), or by one above it."""
    whose = "this conversation's sandbox session" if session else "this command"
    when = "While this command ran, " if session else ""
    if not own_limit:
        return (
            f"[{when}{kills} process(es) of {whose} were killed for memory: the memory "
            "limit set on this server's own cgroup (its service, container or pod), or "
            f"the machine's memory, ran out before the sandbox's limit of {memory_mb} "
            "MB. Use less memory at once, or ask the user to raise that limit]"
        )
    counted = "its /tmp counts too"
    if session:
        counted = "its /tmp and its background processes count too"
    return (
        f"[{when}{kills} process(es) of {whose} were killed: together they went over the "
        f"sandbox's memory limit of {memory_mb} MB ({counted})]"
    )


class ResourceLimits:
    """setrlimit in the child; as root also a pids and memory cgroup per command (root is not
    bound by RLIMIT_NPROC, and per-process limits leave the total open)."""

    def __init__(self, options: LocalSandboxSettings) -> None:
        self.options = options
        self.roots = find_roots() if os.geteuid() == 0 else CgroupRoots()
        if self.roots.folders:
            reap_leftovers(self.roots)

    def describe(self, scope: str = "a command") -> list[str]:
        """Lines for the isolation list; `scope` is what one cgroup holds."""
        o = self.options
        if os.geteuid() != 0 or self.roots.pids is not None:
            processes = f"at most {o.processes} more processes"
        else:
            processes = "processes not limited (running as root without a writable pids cgroup)"
        if self.roots.memory is not None:
            memory = (
                f"memory: at most {o.total_memory_mb} MB for {scope}, all its processes and "
                "its /tmp together (a memory cgroup)"
            )
        else:
            memory = (
                "memory: not bounded in total (no writable memory cgroup here), only per "
                "process; several processes of one command can take more"
            )
        limits = (
            f"limits: {o.cpu_seconds} s CPU and {o.memory_mb} MB of address space per process, "
            f"files up to {o.file_size_mb} MB, {processes}"
        )
        return [limits, memory]

    @contextlib.contextmanager
    def applied(self) -> Iterator[AppliedLimits]:
        """The limits of one command; its cgroup is emptied and removed afterwards."""
        o = self.options
        group = None
        if self.roots.folders:
            group = CommandCgroup.create(self.roots, o.processes, o.total_memory_mb * MB)
        procs_files = [] if group is None else group.procs_files
        limits = self._rlimits()

        def preexec() -> None:
            # Runs in the forked child: only system calls, no locks, no logging.
            for procs_file in procs_files:
                fd = os.open(procs_file, os.O_WRONLY)
                os.write(fd, str(os.getpid()).encode())
                os.close(fd)
            for which, value in limits:
                resource.setrlimit(which, value)

        try:
            yield AppliedLimits(preexec, group, o.total_memory_mb)
        finally:
            if group is not None:
                group.remove()

    def named_rlimits(self) -> dict[str, list[int]]:
        """The per-process limits by name (RLIMIT_CPU: [soft, hard], ...), as a session's
        supervisor sets them in each process it starts."""
        return {RLIMIT_NAMES[which]: list(pair) for which, pair in self._rlimits()}

    def _rlimits(self) -> list[tuple[int, tuple[int, int]]]:
        o = self.options
        wanted = [
            (resource.RLIMIT_CPU, o.cpu_seconds, o.cpu_seconds + 5),
            (resource.RLIMIT_AS, o.memory_mb * MB, o.memory_mb * MB),
            (resource.RLIMIT_FSIZE, o.file_size_mb * MB, o.file_size_mb * MB),
        ]
        tasks = user_tasks(os.getuid()) if os.geteuid() != 0 else None
        if tasks is not None:
            # RLIMIT_NPROC counts every task of the user, so the cap is relative to now.
            cap = tasks + o.processes
            wanted.append((resource.RLIMIT_NPROC, cap, cap))
        limits = []
        for which, soft, hard in wanted:
            _, current_hard = resource.getrlimit(which)
            if current_hard != resource.RLIM_INFINITY:
                soft, hard = min(soft, current_hard), min(hard, current_hard)
            limits.append((which, (soft, hard)))
        return limits


def user_tasks(uid: int) -> int | None:
    """Processes and threads that `uid` runs right now (Linux /proc), else None."""
    try:
        entries = list(os.scandir("/proc"))
    except OSError:
        return None
    total = 0
    for entry in entries:
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            if entry.stat().st_uid == uid:
                fields = Path(entry.path, "stat").read_text().rsplit(")", 1)[1].split()
                total += int(fields[17])  # num_threads, the 20th field of /proc/PID/stat
    return total
