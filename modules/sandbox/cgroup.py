"""A command's cgroup, as root: its processes and its memory (its /tmp included, a tmpfs is
charged to the memory of whoever writes it) bounded together, its stragglers killed at the
end. cgroup v1 keeps each controller in a hierarchy of its own; v2 has one."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from modules.sandbox.cgroup_place import command_parent, hierarchies
from modules.sandbox.runner import pid_alive

log = logging.getLogger(__name__)

CGROUP_PREFIX = "workspace-agent-"  # then the owning agent's pid and a random part
EMPTY_WAIT_SECONDS = 1.0
LIMIT_REACHED_MARGIN = 1024 * 1024  # a charge may fail this far below a v1 limit
Limit = tuple[str, str, bool]  # file, value, whether the host may lack it


@dataclass(frozen=True)
class CgroupRoots:
    """The writable cgroup folders a command's cgroups are made in, per controller."""

    pids: Path | None = None
    memory: Path | None = None
    memory_v2: bool = False

    @property
    def folders(self) -> list[Path]:
        return sorted({root for root in (self.pids, self.memory) if root is not None})


def find_roots() -> CgroupRoots:
    """Where commands' pids and memory cgroups are made (v1 or v2): under the server's own."""
    try:
        mountinfo = Path("/proc/self/mountinfo").read_text()
        own = Path("/proc/self/cgroup").read_text()
    except OSError:
        return CgroupRoots()
    places: dict[str, Path] = {}
    memory_v2 = False
    for hierarchy in hierarchies(mountinfo, own):
        wanted = [c for c in hierarchy.controllers if c not in places]
        parent = command_parent(hierarchy) if wanted else None
        if parent is None:
            continue
        for controller in wanted:
            places[controller] = parent
        memory_v2 = memory_v2 or ("memory" in wanted and hierarchy.v2)
    if places:
        fields = {name: str(folder) for name, folder in places.items()}
        log.info("commands' cgroups are made here", extra={"fields": fields})
    return CgroupRoots(places.get("pids"), places.get("memory"), memory_v2)


class CommandCgroup:
    """One command's cgroup folders (one per hierarchy): made, joined by the command's first
    process, then emptied and removed."""

    def __init__(self, roots: CgroupRoots, folders: list[Path]) -> None:
        self.roots = roots
        self.folders = folders

    @classmethod
    def create(cls, roots: CgroupRoots, processes: int, memory_bytes: int) -> CommandCgroup:
        """Folders under every root with the limits written; those that fail are left out."""
        name = f"{CGROUP_PREFIX}{os.getpid()}-{uuid.uuid4().hex[:8]}"
        limits: dict[Path, list[Limit]] = {}
        if roots.pids is not None:
            limits.setdefault(roots.pids, []).append(("pids.max", str(processes), False))
        if roots.memory is not None:
            limits.setdefault(roots.memory, []).extend(_memory_limits(roots, memory_bytes))
        folders = []
        for root, settings in limits.items():
            folder = root / name
            if _made(folder, settings):
                folders.append(folder)
        return cls(roots, folders)

    @property
    def procs_files(self) -> list[str]:
        return [str(folder / "cgroup.procs") for folder in self.folders]

    def memory_mark(self) -> tuple[int, int]:
        """The kills and (v2) limit hits so far, for `out_of_memory(since=...)` to count only
        what comes after; v1 restarts its peak, which tells its hits (a session's cgroup
        outlives each of its commands)."""
        folder = self._memory_folder()
        if folder is None:
            return 0, 0
        if self.roots.memory_v2:
            events = _counters(folder / "memory.events")
            return events.get("oom_kill", 0), events.get("max", 0)
        for prefix in ("memory", "memory.memsw"):
            with contextlib.suppress(OSError):
                (folder / f"{prefix}.max_usage_in_bytes").write_text("0")
        return _counters(folder / "memory.oom_control").get("oom_kill", 0), 0

    def out_of_memory(self, since: tuple[int, int] = (0, 0)) -> tuple[int, bool]:
        """How many of the command's processes the kernel killed for memory (after `since`,
        a memory_mark), and whether the command reached its own limit (if not, a limit above
        it did it: the server's cgroup)."""
        folder = self._memory_folder()
        if folder is None:
            return 0, False
        if self.roots.memory_v2:
            events = _counters(folder / "memory.events")
            return events.get("oom_kill", 0) - since[0], events.get("max", 0) > since[1]
        kills = _counters(folder / "memory.oom_control").get("oom_kill", 0) - since[0]
        # v1's failcnt stays 0 where memsw is limited too; the peak nears the limit instead.
        reached = any(
            _number(folder / f"{prefix}.max_usage_in_bytes")
            >= _number(folder / f"{prefix}.limit_in_bytes") - LIMIT_REACHED_MARGIN
            for prefix in ("memory", "memory.memsw")
            if (folder / f"{prefix}.limit_in_bytes").exists()
        )
        return kills, reached

    def _memory_folder(self) -> Path | None:
        return next((f for f in self.folders if f.parent == self.roots.memory), None)

    def members(self) -> list[int]:
        found: set[int] = set()
        for folder in self.folders:
            with contextlib.suppress(OSError, ValueError):
                found.update(int(p) for p in (folder / "cgroup.procs").read_text().split())
        return sorted(found)

    def remove(self) -> None:
        """Kill whatever is left in the cgroup and delete its folders."""
        deadline = time.monotonic() + EMPTY_WAIT_SECONDS
        while members := self.members():
            for pid in members:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            if time.monotonic() > deadline:
                break
            time.sleep(0.01)
        for folder in self.folders:
            try:
                folder.rmdir()
            except OSError as exc:
                fields = {"path": str(folder), "error": str(exc)}
                log.warning("could not remove a command's cgroup", extra={"fields": fields})


def _counters(path: Path) -> dict[str, int]:
    """A cgroup file of `name value` lines, as numbers ({} when it cannot be read)."""
    counters = {}
    with contextlib.suppress(OSError, ValueError):
        for line in path.read_text().splitlines():
            name, _, value = line.partition(" ")
            counters[name] = int(value)
    return counters


def _number(path: Path) -> int:
    """A cgroup file holding one number (0 when it cannot be read)."""
    try:
        return int(path.read_text())
    except (OSError, ValueError):
        return 0


def _memory_limits(roots: CgroupRoots, memory_bytes: int) -> list[Limit]:
    if roots.memory_v2:
        return [("memory.max", str(memory_bytes), False), ("memory.swap.max", "0", True)]
    # memsw (memory and swap together) exists only where swap is accounted; it may not be
    # below the plain limit, so it comes second.
    return [
        ("memory.limit_in_bytes", str(memory_bytes), False),
        ("memory.memsw.limit_in_bytes", str(memory_bytes), True),
    ]


def _made(folder: Path, limits: list[Limit]) -> bool:
    """Make `folder` and write its limits (the optional ones where the host has them); on
    failure leave nothing behind."""
    try:
        folder.mkdir()
        for name, value, optional in limits:
            try:
                (folder / name).write_text(value)
            except OSError:
                if not optional:
                    raise
    except OSError as exc:
        log.warning("could not make a command's cgroup", extra={"fields": {"error": str(exc)}})
        with contextlib.suppress(OSError):
            folder.rmdir()
        return False
    return True


def reap_leftovers(roots: CgroupRoots) -> int:
    """Remove the cgroups of agents that died without removing theirs (kill -9)."""
    removed = 0
    for root in roots.folders:
        for path in root.glob(f"{CGROUP_PREFIX}*"):
            owner = path.name.removeprefix(CGROUP_PREFIX).split("-")[0]
            if not owner.isdigit() or int(owner) == os.getpid() or pid_alive(int(owner)):
                continue
            CommandCgroup(roots, [path]).remove()
            removed += not path.exists()
    if removed:
        log.info("removed cgroups left by agents that died", extra={"fields": {"count": removed}})
    return removed
