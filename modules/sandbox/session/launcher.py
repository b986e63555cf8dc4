"""How a session's sandbox starts: its supervisor, with the server's end of the control socket.

A launcher per kind. Local (`LocalLauncher`): under bubblewrap the supervisor is the sandbox's
command and PID 1 of its PID namespace, the control socket one end of a socketpair passed
through bwrap; without bubblewrap (not as root) it is a plain child, or under `unshare` when
that cuts the network. As root, the session's cgroup (memory, its /tmp included, and
processes, for all its processes together) is joined by the sandbox's first process. With
AGENT_SESSION_NETWORK=outbound a bubblewrap session gets slirp4netns in its network namespace
(network.py). Docker's (docker_launcher.py): the supervisor as the container's main process.

Every sandbox starts on one OS thread that lives as long as the server: bubblewrap's
--die-with-parent (PR_SET_PDEATHSIG) fires when the *thread* that started it ends, not the
process, and a tool call's thread ends with the call.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

from modules.sandbox.cgroup import CommandCgroup
from modules.sandbox.confinement import (
    SUPERVISOR_INSIDE,
    Confinement,
    data_pipe,
    identity_files,
    seccomp_pipe,
)
from modules.sandbox.environment import command_environment
from modules.sandbox.resource_limits import ResourceLimits
from modules.sandbox.runner import SandboxUnavailable
from modules.sandbox.session.network import NetworkMode, Prepared, UserNetwork
from modules.sandbox.session.os_threads import (
    new_condition,
    original,
    sleep,
    start_thread,
    wait_for,
)
from utils.settings import Settings

SUPERVISOR = Path(__file__).resolve().with_name("supervisor.py")
STOP_SECONDS = 2.0  # for the sandbox's outer process to end once its supervisor has
START_SECONDS = 15.0  # for a new sandbox's supervisor to answer
T = TypeVar("T")


class OuterProcess(Protocol):
    """What was started around the supervisor (bwrap, unshare, the supervisor itself, or a
    container's engine client): it ends once the supervisor has."""

    def poll(self) -> int | None: ...

    def kill(self) -> None: ...


@dataclass
class Launched:
    """A started sandbox: the server's end of its control socket, the process that was
    started (bwrap, unshare, the supervisor itself, or a container), its cgroup, what every
    command's environment gets besides the base, where a host folder is inside, and what to
    end with it (its network stack, its control folder)."""

    control: Any  # a real socket.socket, SOCK_SEQPACKET
    process: OuterProcess
    cgroup: CommandCgroup | None
    environment: dict[str, str]
    inside: Callable[[Path], str] = str
    cleanups: list[Callable[[], None]] = field(default_factory=list)

    def stop(self) -> None:
        """Wait for the outer process to end (it does once its supervisor did), killing it
        past STOP_SECONDS; then end what goes with it, and empty and remove the cgroup."""
        for _ in range(2):
            deadline = time.monotonic() + STOP_SECONDS
            while self.process.poll() is None and time.monotonic() < deadline:
                sleep(0.01)
            if self.process.poll() is not None:
                break
            with contextlib.suppress(OSError):
                self.process.kill()
        for cleanup in self.cleanups:
            cleanup()
        if self.cgroup is not None:
            self.cgroup.remove()


class SessionLauncher(Protocol):
    """Starts the sandbox of one session."""

    @property
    def kind(self) -> str:
        """The sandbox's kind, as the runner's (docs/protocol.md §4 get_status)."""

    @property
    def network(self) -> NetworkMode:
        """What network its commands have (docs/protocol.md §4 get_status)."""

    @property
    def memory_mb(self) -> int:
        """The memory limit of a session's processes together, as its notes name it."""

    def environment(self) -> dict[str, str]:
        """Every command's environment (the launched sandbox's own added)."""

    def rlimits(self) -> dict[str, list[int]]:
        """Every process's limits by name (RLIMIT_CPU: [soft, hard], ...)."""

    def launch(self, log_path: Path) -> Launched:
        """Start a supervisor in a new sandbox; its errors (bwrap's) go to `log_path`."""

    def close(self) -> None:
        """Every session has ended: release what the launcher holds."""


class LocalLauncher:
    """bubblewrap, unshare or a plain child, as the local runner confines its commands;
    SandboxUnavailable when AGENT_SESSION_NETWORK=outbound cannot be given."""

    def __init__(self, settings: Settings, confinement: Confinement, limits: ResourceLimits):
        assert confinement.refusal is None, "no session where commands are refused"
        self.settings = settings
        self.confinement = confinement
        self.limits = limits
        self.kind = confinement.kind
        self.python = os.path.realpath(sys.executable)
        self.memory_mb = settings.local_sandbox.total_memory_mb
        self.user_network: UserNetwork | None = None
        self.wrap = wrap = confinement.bubblewrap
        if settings.session_network == "outbound":
            if wrap is None:
                raise SandboxUnavailable(
                    "AGENT_SESSION_NETWORK=outbound needs bubblewrap sessions (or Docker): "
                    "without bubblewrap a session has no network namespace of its own"
                )
            self.user_network = UserNetwork()
            self.wrap = dataclasses.replace(wrap, cut_network=True)
        self.network: NetworkMode = _local_network(confinement, self.user_network is not None)

    def environment(self) -> dict[str, str]:
        return command_environment(self.settings)

    def rlimits(self) -> dict[str, list[int]]:
        return self.limits.named_rlimits()

    def close(self) -> None:
        """Nothing to release: every sandbox took what it held with it."""

    def launch(self, log_path: Path) -> Launched:
        """Start the supervisor from the launching thread (see the module's docstring)."""
        return LAUNCHING.call(lambda: self._launch(log_path))

    def _launch(self, log_path: Path) -> Launched:
        socket_module = original("socket")
        ours, theirs = socket_module.socketpair(socket_module.AF_UNIX, socket_module.SOCK_SEQPACKET)
        cgroup = self._cgroup()
        procs_files = [] if cgroup is None else cgroup.procs_files
        seccomp_fd = seccomp_pipe(self.confinement.seccomp)

        def join_cgroup() -> None:
            # Runs in the forked child: only system calls.
            for procs_file in procs_files:
                fd = os.open(procs_file, os.O_WRONLY)
                os.write(fd, str(os.getpid()).encode())
                os.close(fd)

        real = original("subprocess")
        network = self.user_network.prepare() if self.user_network else None
        identity = self._identity()
        passed = [theirs.fileno(), *([] if seccomp_fd is None else [seccomp_fd]), *identity]
        process = None
        try:
            argv, environment = self._argv(theirs.fileno(), seccomp_fd, network, identity)
            log_path.parent.mkdir(parents=True, exist_ok=True)
            with open(log_path, "ab") as errors:
                process = real.Popen(
                    argv,
                    cwd=self.settings.workspace,
                    env=command_environment(self.settings),
                    stdin=real.DEVNULL,
                    stdout=errors,
                    stderr=errors,
                    start_new_session=True,
                    preexec_fn=join_cgroup,
                    pass_fds=passed + (network.child_fds if network else []),
                )
                launched = Launched(ours, process, cgroup, environment)
                if network is not None and self.user_network is not None:
                    network.close_child_fds()
                    # bubblewrap sets up the loopback before the supervisor runs; slirp4netns
                    # configuring the namespace at the same time would make it fail
                    _first_answer(ours, time.monotonic() + START_SECONDS)
                    launched.cleanups.append(self.user_network.attach(network, errors).stop)
        except BaseException:
            ours.close()
            if process is not None:
                with contextlib.suppress(OSError):
                    process.kill()
                process.wait()
            if cgroup is not None:
                cgroup.remove()
            raise
        finally:
            theirs.close()
            for fd in [*([] if seccomp_fd is None else [seccomp_fd]), *identity]:
                os.close(fd)
            if network is not None:
                network.close_child_fds()
        return launched

    def _cgroup(self) -> CommandCgroup | None:
        """The session's cgroup (as root): its memory and processes bounded together."""
        if not self.limits.roots.folders:
            return None
        options = self.settings.local_sandbox
        memory = options.total_memory_mb * 1024 * 1024
        return CommandCgroup.create(self.limits.roots, options.processes, memory)

    def _identity(self) -> dict[int, str]:
        """Pipes holding the session's /etc/passwd and /etc/group, by the path each is shown
        at: started by root, the sandbox's uid would otherwise bear the host's name for it."""
        if self.wrap is None or not self.wrap.as_root:
            return {}
        return {data_pipe(data): path for path, data in identity_files().items()}

    def _argv(
        self,
        control_fd: int,
        seccomp_fd: int | None,
        network: Prepared | None,
        identity: dict[int, str],
    ) -> tuple[list[str], dict[str, str]]:
        """What starts the supervisor, confined as the runner's commands are, and the
        environment its commands get besides the allow-list."""
        argv = [self.python, "-I", "-S", str(SUPERVISOR), str(control_fd)]
        wrap = self.wrap
        if wrap is None:
            workspace = self.settings.workspace
            return self.confinement.wrap(argv, workspace, workspace), {}
        argv[3] = SUPERVISOR_INSIDE
        options = wrap.session_args(self.settings.workspace.resolve(), SUPERVISOR, seccomp_fd)
        extra = [*network.options] if network is not None else []
        for fd, path in identity.items():
            extra += ["--ro-bind-data", str(fd), path]
        return [*options, *extra, "--", *argv], {"HOME": "/tmp"}


def _first_answer(control: Any, deadline: float) -> None:
    """Wait for the supervisor to answer a ping (id 0, before the channel's first)."""
    try:
        control.settimeout(max(0.0, deadline - time.monotonic()))
        control.send(json.dumps({"op": "ping", "id": 0}).encode())
        answer = control.recv(4096)
    except OSError as exc:
        raise SandboxUnavailable(f"the session's supervisor did not start: {exc}") from None
    finally:
        control.settimeout(None)
    if not answer:
        raise SandboxUnavailable("the session's supervisor did not start")


def _local_network(confinement: Confinement, outbound: bool) -> NetworkMode:
    """What network a local session has: its own loopback (bubblewrap or unshare cut it),
    outbound through slirp4netns, or the host's (no isolation, or local_sandbox.network)."""
    if outbound:
        return "outbound"
    wrap = confinement.bubblewrap
    cut = wrap.cut_network if wrap is not None else confinement.unshare is not None
    return "off" if cut else "host"


class _LaunchingThread:
    """Runs the callables given to `call` one at a time on one OS thread that never ends."""

    def __init__(self) -> None:
        self._changed = new_condition()
        self._queue: list[tuple[Callable[[], Any], list[Any]]] = []
        self._thread: Any = None

    def call(self, work: Callable[[], T]) -> T:
        """Run `work` on the launching thread and return what it returned (or raise what it
        raised)."""
        slot: list[Any] = []
        with self._changed:
            if self._thread is None:
                self._thread = start_thread(self._run, "session-launcher")
            self._queue.append((work, slot))
            self._changed.notify_all()
        wait_for(self._changed, lambda: bool(slot), None)
        done, value = slot
        if not done:
            raise value
        result: T = value
        return result

    def _run(self) -> None:
        while True:
            with self._changed:
                self._changed.wait_for(lambda: bool(self._queue))
                work, slot = self._queue.pop(0)
            try:
                outcome: tuple[bool, Any] = (True, work())
            except BaseException as exc:  # handed to the caller
                outcome = (False, exc)
            with self._changed:
                slot.extend(outcome)
                self._changed.notify_all()


LAUNCHING = _LaunchingThread()


def log_tail(path: Path, size: int = 500) -> str:
    """ ": " and the last `size` bytes of a sandbox's log (what it said as it failed), or "";
    only the tail is read: the sandbox writes the log."""
    try:
        with open(path, "rb") as log:
            log.seek(max(0, os.fstat(log.fileno()).st_size - size))
            text = log.read(size).decode(errors="replace").strip()
    except OSError:
        return ""
    return f": {text}" if text else ""
