"""The warm container pool behind the Docker sandbox, and cleanup of containers left over."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import threading
from pathlib import Path, PurePosixPath
from typing import Any

from docker.errors import DockerException
from docker.types import Ulimit

from modules.sandbox.confinement import SANDBOX_HOSTNAME
from modules.sandbox.runner import SandboxUnavailable, pid_alive
from utils.settings import DockerSettings, Settings

log = logging.getLogger(__name__)

WORKDIR = PurePosixPath("/workspace")
LABEL = "workspace-agent.sandbox"  # value: "<hostname>:<pid>" of the owning agent
API_TIMEOUT_SECONDS = 60


class ContainerPool:
    """`pool_size` warm containers kept for commands; each retired after `max_uses` commands.

    Every container the pool made is in `_live` (id -> commands run) until it is removed.
    """

    def __init__(self, client: Any, settings: Settings) -> None:
        self.client = client
        self.options = settings.docker
        self.workspace = settings.workspace
        self.owner = f"{socket.gethostname()}:{os.getpid()}"
        self._idle: list[Any] = []
        self._live: dict[str, int] = {}
        self._inits: dict[str, tuple[int, int]] = {}  # id -> its first process (kill_now)
        self._warming = 0  # containers being created in the background
        self._removing = 0  # containers being removed in the background
        self._closed = False
        self._lock = threading.Condition()

    def warm(self) -> None:
        """Create containers in the background until `pool_size` exist or are coming."""
        with self._lock:
            missing = self.options.pool_size - len(self._live) - self._warming
            if self._closed or missing <= 0:
                return
            self._warming += missing
        for _ in range(missing):
            threading.Thread(target=self._add_one, name="sandbox-warm", daemon=True).start()

    def wait_ready(self, timeout: float) -> bool:
        """Wait until `pool_size` containers are idle; True when they are."""
        with self._lock:
            return self._lock.wait_for(lambda: len(self._idle) >= self.options.pool_size, timeout)

    @property
    def idle(self) -> list[str]:
        """Ids of the containers waiting for a command."""
        with self._lock:
            return [c.id for c in self._idle]

    def acquire(self) -> Any:
        """A container for one command: a warm one, else a new one (cold)."""
        with self._lock:
            if self._closed:
                raise SandboxUnavailable("the Docker sandbox is closed")
            if self._idle:
                return self._idle.pop()
        return self._create()

    def release(self, container: Any) -> None:
        """Back to the pool after a clean command; retired when worn out or surplus."""
        with self._lock:
            uses = self._live.get(container.id, 0) + 1
            self._live[container.id] = uses
            keep = not self._closed and uses < self.options.max_uses
            if keep and len(self._idle) < self.options.pool_size:
                self._idle.append(container)
                self._lock.notify_all()
                return
        self.discard(container, "worn out" if uses >= self.options.max_uses else "surplus")

    def kill_now(self, container: Any) -> None:
        """Kill every process of the container at once where this process may (root, the
        engine on this machine): a signal to its first process ends its PID namespace, with
        no round trip through the engine (which may take a loaded machine's time to answer).
        Its PID namespace is checked first, so a PID used again is never signalled."""
        init = self._inits.get(container.id)
        if init is None:
            return
        pid, namespace = init
        with contextlib.suppress(OSError):
            if os.stat(f"/proc/{pid}/ns/pid").st_ino == namespace:
                os.kill(pid, signal.SIGKILL)

    def discard(self, container: Any, reason: str) -> None:
        """Kill and remove a container in the background, and warm a successor."""
        fields = {"id": container.short_id, "reason": reason}
        log.info("sandbox container retired", extra={"fields": fields})
        with self._lock:
            self._removing += 1
        threading.Thread(target=self._retire, args=(container.id,), daemon=True).start()

    def close(self) -> None:
        """Remove every container this pool made, after the ones being made or removed."""
        with self._lock:
            self._closed = True
            self._idle.clear()
            self._lock.wait_for(self._quiet, API_TIMEOUT_SECONDS)
            ids = list(self._live)
        threads = [threading.Thread(target=self._remove, args=(cid,)) for cid in ids]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=API_TIMEOUT_SECONDS)

    def _add_one(self) -> None:
        try:
            container = self._create()
        except SandboxUnavailable as exc:
            with self._lock:
                self._warming -= 1
                self._lock.notify_all()
                closed = self._closed
            if not closed:
                fields = {"error": str(exc)}
                log.warning("could not warm a sandbox container", extra={"fields": fields})
            return
        with self._lock:
            self._warming -= 1
            self._lock.notify_all()
            if len(self._idle) < self.options.pool_size:
                self._idle.append(container)
                return
        self._remove(container.id)

    def _quiet(self) -> bool:
        return not self._warming and not self._removing

    def _create(self) -> Any:
        """Start one locked-down container that idles until it gets commands."""
        try:
            container = self.client.containers.run(self.options.image, **self._config())
        except DockerException as exc:
            message = f"could not start a {self.options.image} container: {exc}"
            raise SandboxUnavailable(message) from exc
        init = _first_process(container)
        with self._lock:
            closed = self._closed
            self._live[container.id] = 0
            if init is not None:
                self._inits[container.id] = init
        if closed:
            self._remove(container.id)
            raise SandboxUnavailable("the Docker sandbox is closed")
        return container

    def _config(self) -> dict[str, Any]:
        return {
            **locked_down(self.options, self.workspace, self.owner),
            "entrypoint": ["sleep", "infinity"],
            "command": [],
            "init": True,
            "user": "0:0",  # only the idle PID 1; commands run as container_user()
            "network_disabled": not self.options.network,
        }

    def _retire(self, container_id: str) -> None:
        try:
            self._remove(container_id)
        finally:
            with self._lock:
                self._removing -= 1
                self._lock.notify_all()

    def _remove(self, container_id: str) -> None:
        with contextlib.suppress(DockerException):
            self.client.api.remove_container(container_id, force=True)
        with self._lock:
            self._live.pop(container_id, None)
            self._inits.pop(container_id, None)
            closed = self._closed
        if not closed:
            self.warm()


def _first_process(container: Any) -> tuple[int, int] | None:
    """The container's first process as seen here (its PID, its PID namespace's inode), when
    it runs on this machine in a PID namespace of its own: its cgroup names the container."""
    with contextlib.suppress(DockerException, OSError, ValueError, TypeError):
        container.reload()
        pid = int(container.attrs["State"]["Pid"])
        namespace = os.stat(f"/proc/{pid}/ns/pid").st_ino
        names_it = container.id in Path(f"/proc/{pid}/cgroup").read_text()
        if pid > 0 and names_it and namespace != os.stat("/proc/self/ns/pid").st_ino:
            return pid, namespace
    return None


def locked_down(options: DockerSettings, workspace: Path, owner: str) -> dict[str, Any]:
    """What every sandbox container runs with (containers.run's arguments): no capabilities,
    no privilege escalation, a read-only root with a private /tmp, the workspace at WORKDIR,
    the memory, CPU, process and file size limits, removed when it ends, labelled with its
    owner (`reap_orphans`)."""
    size = options.file_size_mb * 1024 * 1024
    return {
        "detach": True,
        "auto_remove": True,
        "working_dir": str(WORKDIR),
        "hostname": SANDBOX_HOSTNAME,
        "volumes": {str(workspace): {"bind": str(WORKDIR), "mode": "rw"}},
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges"],
        "read_only": True,
        "tmpfs": {"/tmp": f"rw,nosuid,nodev,size={options.tmp_size},mode=1777"},
        "mem_limit": options.memory,
        "memswap_limit": options.memory,
        "nano_cpus": int(options.cpus * 1e9),
        "pids_limit": options.pids_limit,
        "ulimits": [Ulimit(name="fsize", soft=size, hard=size)],
        "labels": {LABEL: owner},
    }


def container_path(workspace: Path, cwd: Path) -> PurePosixPath:
    """Where `cwd`, a folder of the workspace on this machine, is inside a container (WORKDIR
    for anything outside the workspace)."""
    try:
        relative = cwd.resolve().relative_to(workspace.resolve())
    except ValueError:
        return WORKDIR
    return WORKDIR.joinpath(*relative.parts)


def reap_orphans(client: Any) -> None:
    """Remove sandbox containers left by agents on this host that are no longer running."""
    host = socket.gethostname()
    with contextlib.suppress(DockerException):
        for summary in client.api.containers(all=True, filters={"label": LABEL}):
            owner = summary.get("Labels", {}).get(LABEL, "")
            owner_host, _, pid = owner.rpartition(":")
            if owner_host == host and pid.isdigit() and not pid_alive(int(pid)):
                with contextlib.suppress(DockerException):
                    client.api.remove_container(summary["Id"], force=True)
