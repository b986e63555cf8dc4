"""Local confinement: bubblewrap when it works, else unshare or nothing; as root, bubblewrap
or no command at all.

Started by root, bubblewrap would leave a command every capability in its namespaces
(enough to remount the host's read-only folders writable). So every command runs with no
capabilities, no new privileges and no further user namespaces, as root under uid 1000 of
its own user namespace, with set-id bits refused; that uid is still root's on the host, so
the files under /etc only root may read are covered too.
"""

from __future__ import annotations

import logging
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from modules.sandbox.seccomp import setid_filter
from utils.settings import LocalSandboxSettings

log = logging.getLogger(__name__)

PROBE_TIMEOUT_SECONDS = 5.0
MB = 1024 * 1024
SANDBOX_ID = "1000"  # the uid and gid a command started by root has in its user namespace
SANDBOX_USER = "user"  # SANDBOX_ID's name in a session's /etc/passwd, not the host's user's
SANDBOX_HOSTNAME = "workspace"  # the host name a sandbox sees, in its own UTS namespace
SMALL_TMPFS_BYTES = {"/run": 16 * MB, "/dev/shm": 64 * MB}
SUPERVISOR_INSIDE = "/run/workspace-agent/supervisor.py"  # a session's supervisor, in its view

NOT_ISOLATED = "not isolated: commands can read and write anything your user can"
KILL_NOTE = "processes: run in their own process group, all killed at timeout or cancel"
ROOT_REFUSAL = (
    "Commands are refused: this server runs as root and bubblewrap, which would run them "
    "without root's powers, is not usable here. Install it (apt-get install bubblewrap), use "
    "the Docker sandbox (AGENT_SANDBOX=docker), or run the server as an ordinary user."
)

SYSTEM_DIRS = ("/usr", "/etc")  # programs, libraries and system configuration, read-only
MERGED_USR = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")  # links into /usr, or dirs


@dataclass(frozen=True)
class Bubblewrap:
    """How bubblewrap builds a command's view and identity."""

    path: str
    cut_network: bool
    visible: tuple[str, ...] = ()
    as_root: bool = False  # started by root: an unprivileged uid inside, root-only files hidden
    hidden: tuple[str, ...] = ()
    tmp_bytes: int | None = None  # None: this bubblewrap cannot size a tmpfs
    disable_userns: bool = True
    bind_fd: bool = True  # --ro-bind-fd (bubblewrap 0.7): a file open here, shown inside

    def args(self, workspace: Path, cwd: Path, seccomp_fd: int | None = None) -> list[str]:
        """bwrap options building the view from an allow-list, never from `/`: the system
        folders and the Python installation read-only, the workspace writable, a private
        /tmp and /run, its own /dev and /proc (its /proc/sys read-only), nothing else."""
        args = self._view(self.cut_network, self.visible)
        args += ["--bind", str(workspace), str(workspace), "--chdir", str(cwd)]
        return args + _seccomp(seccomp_fd)

    def session_args(
        self, workspace: Path, supervisor: Path, seccomp_fd: int | None = None
    ) -> list[str]:
        """bwrap options for a conversation's session: a command's view, in which the
        supervisor (shown read-only at SUPERVISOR_INSIDE) is PID 1 of the PID namespace, so it
        reaps every orphan and the kernel ends them all when it exits."""
        args = self.args(workspace, workspace, seccomp_fd)
        return [*args, "--as-pid-1", "--ro-bind", str(supervisor), SUPERVISOR_INSIDE]

    def worker_args(
        self, readable: Sequence[Path], cwd: Path, seccomp_fd: int | None = None
    ) -> list[str]:
        """bwrap options for a child parsing hostile data: a command's view with no workspace,
        no network and no visible folders of the settings; only `readable` (the program's code
        it imports) is added, read-only."""
        args = self._view(True, ())
        for folder in readable:
            args += ["--ro-bind", str(folder), str(folder)]
        return [*args, "--chdir", str(cwd), *_seccomp(seccomp_fd)]

    def _view(self, cut_network: bool, visible: Sequence[str]) -> list[str]:
        args = [self.path, "--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts"]
        args += ["--hostname", SANDBOX_HOSTNAME]
        args += ["--unshare-cgroup-try", "--die-with-parent", "--new-session", "--cap-drop", "ALL"]
        if self.disable_userns:
            args.append("--disable-userns")
        if self.as_root:
            args += ["--uid", SANDBOX_ID, "--gid", SANDBOX_ID]
        if cut_network:
            args.append("--unshare-net")
        for folder in SYSTEM_DIRS:
            args += ["--ro-bind", folder, folder]
        for folder in MERGED_USR:
            if os.path.islink(folder):
                args += ["--symlink", os.readlink(folder), folder]
            elif os.path.isdir(folder):
                args += ["--ro-bind", folder, folder]
        args += ["--dev", "/dev", "--proc", "/proc", "--ro-bind", "/proc/sys", "/proc/sys"]
        args += self._tmpfs("/tmp", self.tmp_bytes)
        for where, size in SMALL_TMPFS_BYTES.items():
            args += self._tmpfs(where, size)
        args += ["--dir", "/var/tmp", "--symlink", "../run", "/var/run", "--setenv", "HOME", "/tmp"]
        for folder in [*interpreter_dirs(), *visible]:
            args += ["--ro-bind", folder, folder]
        for path in self.hidden:
            if os.path.isdir(path):
                args += ["--tmpfs", path, "--remount-ro", path]
            else:
                args += ["--ro-bind", "/dev/null", path]
        return args

    def _tmpfs(self, where: str, size: int | None) -> list[str]:
        sized = ["--size", str(size)] if size is not None and self.tmp_bytes is not None else []
        return [*sized, "--tmpfs", where]


@dataclass(frozen=True)
class Confinement:
    """How a local command is wrapped: the kind reported, what it protects, the argv prefix."""

    kind: str
    isolation: tuple[str, ...]
    bubblewrap: Bubblewrap | None = None
    unshare: str | None = None  # path to unshare, which cuts the network only
    refusal: str | None = None  # commands are not run at all, for this reason
    seccomp: bytes | None = field(default=None, repr=False)

    def wrap(
        self, argv: list[str], workspace: Path, cwd: Path, seccomp_fd: int | None = None
    ) -> list[str]:
        """The argv that runs `argv` inside this confinement."""
        if self.bubblewrap is not None:
            return [*self.bubblewrap.args(workspace, cwd, seccomp_fd), "--", *argv]
        if self.unshare is not None:
            return [self.unshare, "--user", "--map-root-user", "--net", "--", *argv]
        return argv


def _seccomp(fd: int | None) -> list[str]:
    return [] if fd is None else ["--seccomp", str(fd)]


def seccomp_pipe(program: bytes | None) -> int | None:
    """A pipe's reading end holding a seccomp `program` for bwrap to read; the caller closes
    it once the child started."""
    return None if program is None else data_pipe(program)


def data_pipe(data: bytes) -> int:
    """A pipe's reading end holding `data` (far below a pipe's buffer, so the write never
    waits for a reader)."""
    read, write = os.pipe()
    try:
        os.write(write, data)
    finally:
        os.close(write)
    return read


def identity_files() -> dict[str, bytes]:
    """/etc/passwd and /etc/group as a session started by root shows them: root, SANDBOX_ID as
    SANDBOX_USER (a shell's prompt names it, not the host's user of that uid) and nobody, the
    only ids its user namespace maps."""
    users = (
        "root:x:0:0:root:/root:/bin/sh\n"
        f"{SANDBOX_USER}:x:{SANDBOX_ID}:{SANDBOX_ID}:{SANDBOX_USER}:/tmp:/bin/bash\n"
        "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
    )
    groups = f"root:x:0:\n{SANDBOX_USER}:x:{SANDBOX_ID}:\nnogroup:x:65534:\n"
    return {"/etc/passwd": users.encode(), "/etc/group": groups.encode()}


def interpreter_dirs() -> list[str]:
    """The Python installation's folders (a virtualenv and its base) outside /usr."""
    dirs = {Path(p).resolve() for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    usr = Path("/usr")
    return sorted(str(d) for d in dirs if d != usr and usr not in d.parents)


def plain() -> Confinement:
    """No confinement beyond the process group and the resource limits."""
    return Confinement("local", ("network: open", NOT_ISOLATED, KILL_NOTE))


def refused() -> Confinement:
    """Root without bubblewrap: no command runs."""
    return Confinement("local", (f"commands: {ROOT_REFUSAL}",), refusal=ROOT_REFUSAL)


def detect_confinement(options: LocalSandboxSettings, workspace: Path) -> Confinement:
    """The strongest confinement that works here: bubblewrap, then (not as root) unshare,
    then none; as root without bubblewrap, a refusal."""
    as_root = os.geteuid() == 0
    wrap = usable_bubblewrap(options, lambda wrap: wrap.args(workspace, workspace))
    if wrap is not None:
        seccomp = setid_filter()
        isolation = _isolation(wrap, options, seccomp is not None)
        return Confinement("bubblewrap", isolation, wrap, seccomp=seccomp)
    if as_root:
        log.warning("commands refused: running as root without a usable bubblewrap")
        return refused()
    unshare = shutil.which("unshare") if not options.network else None
    if unshare and _works([unshare, "--user", "--map-root-user", "--net", "--", "true"]):
        network = "network: cut (own empty network namespace, via unshare)"
        return Confinement("local", (network, NOT_ISOLATED, KILL_NOTE), unshare=unshare)
    return plain()


def usable_bubblewrap(
    options: LocalSandboxSettings, view: Callable[[Bubblewrap], list[str]]
) -> Bubblewrap | None:
    """bubblewrap as the settings ask for it, when it is installed and `true` runs in the view
    `view(bubblewrap)` gives (its options, before `--`)."""
    path = shutil.which("bwrap") if options.bubblewrap else None
    if not path:
        return None
    wrap = _bubblewrap(path, options, os.geteuid() == 0)
    if _works([*view(wrap), "--", "true"]):
        return wrap
    log.warning("bubblewrap is installed but cannot create its sandbox here")
    return None


def _bubblewrap(path: str, options: LocalSandboxSettings, as_root: bool) -> Bubblewrap:
    visible = tuple(str(Path(p).expanduser().resolve()) for p in options.visible)
    offered = _options_of(path)
    return Bubblewrap(
        path,
        cut_network=not options.network,
        visible=visible,
        as_root=as_root,
        hidden=tuple(root_only_entries([SYSTEM_DIRS[1], *visible])) if as_root else (),
        tmp_bytes=options.tmp_mb * MB if "--size" in offered else None,
        disable_userns="--disable-userns" in offered,
        bind_fd="--ro-bind-fd" in offered,
    )


def _options_of(path: str) -> str:
    try:
        done = subprocess.run([path, "--help"], capture_output=True, timeout=PROBE_TIMEOUT_SECONDS)
    except Exception:  # OSError, TimeoutExpired (of another class under eventlet's subprocess)
        return ""
    return done.stdout.decode(errors="replace")


def root_only_entries(folders: list[str]) -> list[str]:
    """Files others may not read and folders others may not enter, under `folders`."""
    found: list[str] = []
    pending = list(folders)
    while pending:
        try:
            entries = list(os.scandir(pending.pop()))
        except OSError:
            continue
        for entry in entries:
            try:
                mode = entry.stat(follow_symlinks=False).st_mode
            except OSError:
                continue
            if stat.S_ISDIR(mode):
                if mode & stat.S_IROTH and mode & stat.S_IXOTH:
                    pending.append(entry.path)
                else:
                    found.append(entry.path)
            elif stat.S_ISREG(mode) and not mode & stat.S_IROTH:
                found.append(entry.path)
    return sorted(found)


def _isolation(wrap: Bubblewrap, options: LocalSandboxSettings, filtered: bool) -> tuple[str, ...]:
    shown = ", ".join([*SYSTEM_DIRS, *interpreter_dirs(), *wrap.visible])
    network = (
        "network: cut (own empty network namespace)"
        if wrap.cut_network
        else "network: open, including the host's abstract Unix sockets"
    )
    tmp = f"a private /tmp ({options.tmp_mb} MB)" if wrap.tmp_bytes else "a private /tmp"
    if wrap.as_root:
        user = (
            f"user: uid {SANDBOX_ID} of its own user namespace, with no capabilities, no new "
            "privileges" + (", no further user namespaces" if wrap.disable_userns else "")
            + "; on the host it is root, this server's user, so the files it writes in the "
            "workspace belong to root"
        )  # fmt: skip
        readable = (
            "still exposed: what root may read in those read-only folders, except the files "
            f"of /etc only root may read ({len(wrap.hidden)} hidden), and the kernel, shared "
            "with the host"
        )
    else:
        user = "user: your own, with no capabilities and no new privileges"
        readable = (
            "still exposed: what your user may read in those read-only folders (system "
            "configuration in /etc among it), and the kernel, shared with the host"
        )
    return (
        network,
        f"filesystem: only the workspace and {tmp}, /dev/shm and /run are writable; "
        f"read-only: {shown}; nothing else of this machine is visible (no home folders, /var "
        "or host sockets)",
        user,
        "set-id bits: refused, so no command leaves a setuid or setgid program behind"
        if filtered
        else "set-id bits: not refused (no seccomp filter for this machine's architecture)",
        readable,
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
