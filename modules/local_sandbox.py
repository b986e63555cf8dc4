"""Local confinement: resource limits for every command, plus bubblewrap or unshare when usable."""

from __future__ import annotations

import contextlib
import logging
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from modules.sandbox import pid_alive
from utils.settings import LocalSandboxSettings

log = logging.getLogger(__name__)

PROBE_TIMEOUT_SECONDS = 5.0
CGROUP_EMPTY_WAIT_SECONDS = 1.0
MB = 1024 * 1024
CGROUP_PREFIX = "workspace-agent-"  # then the owning agent's pid and a random part

NOT_ISOLATED = "not isolated: commands can read and write anything your user can"
KILL_NOTE = "processes: run in their own process group, all killed at timeout or cancel"


SYSTEM_DIRS = ("/usr", "/etc")  # programs, libraries and system configuration, read-only
MERGED_USR = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")  # links into /usr, or dirs


@dataclass(frozen=True)
class Confinement:
    """How a local command is wrapped: the kind reported, what it protects, the argv prefix."""

    kind: str
    isolation: tuple[str, ...]
    tool: str | None = None  # path to bwrap or unshare
    cut_network: bool = False
    visible: tuple[str, ...] = ()  # host folders bubblewrap shows read-only besides the system's

    def wrap(self, argv: list[str], workspace: Path, cwd: Path) -> list[str]:
        """The argv that runs `argv` inside this confinement."""
        if self.tool is None:
            return argv
        if self.kind == "bubblewrap":
            args = bwrap_args(self.tool, workspace, cwd, self.cut_network, self.visible)
            return [*args, "--", *argv]
        return [self.tool, "--user", "--map-root-user", "--net", "--", *argv]


def bwrap_args(
    bwrap: str, workspace: Path, cwd: Path, cut_network: bool, visible: tuple[str, ...] = ()
) -> list[str]:
    """bwrap options building the command's view from an allow-list, never from `/`: the
    system folders and the Python installation read-only, the workspace writable, a private
    /tmp and /run, its own /dev and /proc, and nothing else of the host (no home folders,
    /var, /srv, /mnt, and so no host sockets such as Docker's, containerd's or D-Bus's)."""
    args = [bwrap, "--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts"]
    args += ["--unshare-cgroup-try", "--die-with-parent", "--new-session"]
    if cut_network:
        args.append("--unshare-net")
    for folder in SYSTEM_DIRS:
        args += ["--ro-bind", folder, folder]
    for folder in MERGED_USR:
        if os.path.islink(folder):
            args += ["--symlink", os.readlink(folder), folder]
        elif os.path.isdir(folder):
            args += ["--ro-bind", folder, folder]
    args += ["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--tmpfs", "/run"]
    args += ["--dir", "/var/tmp", "--symlink", "../run", "/var/run", "--setenv", "HOME", "/tmp"]
    for folder in [*interpreter_dirs(), *visible]:
        args += ["--ro-bind", folder, folder]
    args += ["--bind", str(workspace), str(workspace), "--chdir", str(cwd)]
    return args


def interpreter_dirs() -> list[str]:
    """The Python installation's folders (a virtualenv and its base) outside /usr."""
    dirs = {Path(p).resolve() for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    usr = Path("/usr")
    return sorted(str(d) for d in dirs if d != usr and usr not in d.parents)


def plain() -> Confinement:
    """No confinement beyond the process group and the resource limits."""
    return Confinement("local", ("network: open", NOT_ISOLATED, KILL_NOTE))


def detect_confinement(options: LocalSandboxSettings, workspace: Path) -> Confinement:
    """The strongest confinement that works here: bubblewrap, then unshare, then none."""
    cut = not options.network
    bwrap = shutil.which("bwrap") if options.bubblewrap else None
    visible = tuple(str(Path(p).expanduser().resolve()) for p in options.visible)
    probe = [*bwrap_args(bwrap, workspace, workspace, cut, visible), "--", "true"] if bwrap else []
    if bwrap and _works(probe):
        return Confinement("bubblewrap", _bubblewrap_isolation(cut, visible), bwrap, cut, visible)
    if bwrap:
        log.warning("bubblewrap is installed but cannot create its sandbox here")
    unshare = shutil.which("unshare") if cut else None
    if unshare and _works([unshare, "--user", "--map-root-user", "--net", "--", "true"]):
        network = "network: cut (own empty network namespace, via unshare)"
        return Confinement("local", (network, NOT_ISOLATED, KILL_NOTE), unshare, True)
    return plain()


def _bubblewrap_isolation(cut: bool, visible: tuple[str, ...]) -> tuple[str, ...]:
    shown = ", ".join([*SYSTEM_DIRS, *interpreter_dirs(), *visible])
    network = (
        "network: cut (own empty network namespace)"
        if cut
        else "network: open, including the host's abstract Unix sockets"
    )
    return (
        network,
        "filesystem: only the workspace and a private /tmp and /run are writable; read-only: "
        f"{shown}; nothing else of this machine is visible (no home folders, /var or host "
        "sockets)",
        "still exposed: what your user may read in those read-only folders (system "
        "configuration in /etc among it), and the kernel, shared with the host",
        "processes: own PID namespace, all killed at timeout or cancel",
    )


def _works(argv: list[str]) -> bool:
    try:
        done = subprocess.run(argv, capture_output=True, timeout=PROBE_TIMEOUT_SECONDS)
    except Exception:  # OSError, TimeoutExpired (of another class under eventlet's subprocess)
        return False
    if done.returncode:
        reason = done.stderr[-300:].decode(errors="replace")
        log.info("sandbox probe failed", extra={"fields": {"argv0": argv[0], "stderr": reason}})
    return done.returncode == 0


class ResourceLimits:
    """setrlimit in the child, plus a pids cgroup for root (whom RLIMIT_NPROC does not bind)."""

    def __init__(self, options: LocalSandboxSettings) -> None:
        self.options = options
        self.cgroup_root = find_pids_cgroup() if os.geteuid() == 0 else None
        if self.cgroup_root is not None:
            PidsCgroup.reap_leftovers(self.cgroup_root)

    def describe(self) -> str:
        """One line for the isolation list."""
        o = self.options
        if os.geteuid() != 0 or self.cgroup_root is not None:
            processes = f"at most {o.processes} more processes"
        else:
            processes = "processes not limited (running as root without a writable pids cgroup)"
        return (
            f"limits: {o.cpu_seconds} s CPU and {o.memory_mb} MB of address space per process, "
            f"files up to {o.file_size_mb} MB, {processes}"
        )

    @contextlib.contextmanager
    def applied(self) -> Iterator[Callable[[], None]]:
        """A preexec function for one command; the command's cgroup is removed afterwards."""
        group = PidsCgroup.create(self.cgroup_root, self.options.processes)
        limits = self._rlimits()
        procs_file = None if group is None else str(group.path / "cgroup.procs")

        def preexec() -> None:
            # Runs in the forked child: only system calls, no locks, no logging.
            if procs_file is not None:
                fd = os.open(procs_file, os.O_WRONLY)
                os.write(fd, str(os.getpid()).encode())
                os.close(fd)
            for which, value in limits:
                resource.setrlimit(which, value)

        try:
            yield preexec
        finally:
            if group is not None:
                group.remove()

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


def find_pids_cgroup() -> Path | None:
    """A writable cgroup directory with the pids controller (v1 hierarchy or v2 root)."""
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        left, _, right = line.partition(" - ")
        fstype, _, options = [*right.split(), "", "", ""][:3]
        mountpoint = Path(left.split()[4])
        v1 = fstype == "cgroup" and "pids" in options.split(",")
        v2 = fstype == "cgroup2" and _v2_delegates_pids(mountpoint)
        if (v1 or v2) and os.access(mountpoint, os.W_OK):
            return mountpoint
    return None


def _v2_delegates_pids(mountpoint: Path) -> bool:
    try:
        return "pids" in (mountpoint / "cgroup.subtree_control").read_text().split()
    except OSError:
        return False


class PidsCgroup:
    """One command's pids cgroup: caps its processes, kills stragglers, then goes away."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @classmethod
    def create(cls, root: Path | None, limit: int) -> PidsCgroup | None:
        """A fresh cgroup under `root` limited to `limit` tasks, or None when impossible."""
        if root is None:
            return None
        path = root / f"{CGROUP_PREFIX}{os.getpid()}-{uuid.uuid4().hex[:8]}"
        try:
            path.mkdir()
            (path / "pids.max").write_text(str(limit))
        except OSError as exc:
            log.warning("could not create a pids cgroup", extra={"fields": {"error": str(exc)}})
            with contextlib.suppress(OSError):
                path.rmdir()
            return None
        return cls(path)

    @staticmethod
    def reap_leftovers(root: Path) -> int:
        """Remove the cgroups of agents that died without removing theirs (kill -9)."""
        removed = 0
        for path in root.glob(f"{CGROUP_PREFIX}*"):
            owner = path.name.removeprefix(CGROUP_PREFIX).split("-")[0]
            if not owner.isdigit() or int(owner) == os.getpid() or pid_alive(int(owner)):
                continue
            PidsCgroup(path).remove()
            removed += not path.exists()
        if removed:
            log.info(
                "removed cgroups left by agents that died", extra={"fields": {"count": removed}}
            )
        return removed

    def members(self) -> list[int]:
        """Pids still in the cgroup."""
        with contextlib.suppress(OSError, ValueError):
            return [int(p) for p in (self.path / "cgroup.procs").read_text().split()]
        return []

    def remove(self) -> None:
        """Kill whatever is left in the cgroup and delete it."""
        deadline = time.monotonic() + CGROUP_EMPTY_WAIT_SECONDS
        while members := self.members():
            for pid in members:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            if time.monotonic() > deadline:
                break
            time.sleep(0.01)
        try:
            self.path.rmdir()
        except OSError as exc:
            log.warning(
                "could not remove a pids cgroup",
                extra={"fields": {"path": str(self.path), "error": str(exc)}},
            )
