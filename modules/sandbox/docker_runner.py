"""The Docker sandbox: each command runs in a warm, locked-down container from the pool."""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import socket
import stat
import struct
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Unpack

import docker
from docker.errors import DockerException, ImageNotFound

from modules.sandbox.disk_floor import DiskFloor
from modules.sandbox.disk_watch import WATCHER
from modules.sandbox.docker_pool import (
    API_TIMEOUT_SECONDS,
    WORKDIR,
    ContainerPool,
    container_path,
    reap_orphans,
)
from modules.sandbox.environment import named_variables
from modules.sandbox.output import OutputReader
from modules.sandbox.runner import CommandResult, RunOptions, SandboxUnavailable, finished
from utils.cancel import CancelToken
from utils.settings import DockerSettings, Settings

log = logging.getLogger(__name__)

PING_TIMEOUT_SECONDS = 3
DRAIN_SECONDS = 1.0  # after a kill, how long the stream may take to end
EXIT_CODE_WAIT_SECONDS = 2.0
# Runs the command once the client has sent one line (so no output can arrive before the
# client reads it), then kills whatever the command left behind (PID 1 belongs to root).
_WRAPPER = [
    "sh",
    "-c",
    'read -r _ || exit 126; "$@"; status=$?; kill -s KILL -- -1 2>/dev/null; exit $status',
    "sandbox",
]


def docker_runner(settings: Settings, *, required: bool) -> DockerRunner | None:
    """A DockerRunner when an engine answers and the image is there (pulled when required);
    None when not required and Docker cannot be used; SandboxUnavailable when required."""
    image = settings.docker.image
    try:
        client = docker.from_env(timeout=PING_TIMEOUT_SECONDS)
        client.ping()
        client.api.timeout = API_TIMEOUT_SECONDS
        try:
            client.images.get(image)
        except ImageNotFound:
            if not required:
                fields = {"image": image, "hint": f"docker pull {image}"}
                log.warning(
                    "sandbox image missing; using the local sandbox", extra={"fields": fields}
                )
                return None
            log.info("pulling the sandbox image", extra={"fields": {"image": image}})
            client.images.pull(image)
    except DockerException as exc:
        if required:
            message = f"AGENT_SANDBOX=docker but Docker is not usable: {exc}"
            raise SandboxUnavailable(message) from exc
        log.info("no Docker engine answers; using the local sandbox")
        return None
    return DockerRunner(settings, client)


def container_user(options: DockerSettings, workspace: Path) -> str:
    """uid:gid for commands: configured, else ours, else (as root) the workspace owner's or
    1000:1000, so commands never run as root and files keep a sensible owner."""
    if options.user:
        return options.user
    if os.getuid() != 0:
        return f"{os.getuid()}:{os.getgid()}"
    st = workspace.stat()
    return f"{st.st_uid}:{st.st_gid}" if st.st_uid != 0 else "1000:1000"


class _Frames:
    """Strips the 8-byte headers (stream type, size) of an attached exec's multiplexed output."""

    def __init__(self) -> None:
        self.pending = b""

    def __call__(self, chunk: bytes) -> bytes:
        self.pending += chunk
        out = []
        while len(self.pending) >= 8:
            size = struct.unpack(">I", self.pending[4:8])[0]
            if len(self.pending) < 8 + size:
                break
            out.append(self.pending[8 : 8 + size])
            self.pending = self.pending[8 + size :]
        return b"".join(out)


class _ExecStream:
    """The attached socket of one exec: stdin in, the command's output read as it comes."""

    def __init__(self, sock: Any, limit: int, on_output: Callable[[str], None]) -> None:
        self.handle = sock
        self.sock = getattr(sock, "_sock", sock)
        self.output = OutputReader(
            self.sock.fileno(), self.sock.recv, limit, on_output, unframe=_Frames()
        )

    def send_stdin(self, text: str | None) -> None:
        """Send the start line and stdin from a thread, then close our writing side."""
        data = b"\n" + (text or "").encode("utf-8")

        def write() -> None:
            with contextlib.suppress(OSError):
                self.sock.sendall(data)
            with contextlib.suppress(OSError):
                self.sock.shutdown(socket.SHUT_WR)

        threading.Thread(target=write, name="sandbox-stdin", daemon=True).start()

    def close(self) -> None:
        self.output.close()
        with contextlib.suppress(OSError):
            self.handle.close()


class DockerRunner:
    """Runs each command in a warm container from the pool; a misbehaving one is replaced."""

    def __init__(self, settings: Settings, client: Any) -> None:
        self.settings = settings
        self.client = client
        self.pool = ContainerPool(client, settings)
        self.user = container_user(settings.docker, settings.workspace)
        self.kind = "docker"
        self.python = settings.docker.python
        self.disk_floor = DiskFloor(settings)
        self.isolation = [*self._describe(), self.disk_floor.describe()]
        _warn_if_unwritable(settings)
        reap_orphans(client)
        self.pool.warm()
        atexit.register(self.close)

    def close(self) -> None:
        """Remove every container; the runner may not be used afterwards."""
        atexit.unregister(self.close)
        self.pool.close()

    def run(self, argv: list[str], **options: Unpack[RunOptions]) -> CommandResult:
        """Run `argv` in a container; output streamed and capped like the local runner."""
        cancel, timeout = options["cancel"], options["timeout"]
        cancel.raise_if_cancelled()
        self.disk_floor.refuse_if_short()
        started = time.monotonic()
        container, exec_id, stream = self._start(argv, options["cwd"], options["on_output"])
        unregister = cancel.on_cancel(lambda: self._kill_soon(container))
        watch = WATCHER.watch(self.disk_floor, lambda: self._kill_soon(container))
        exit_code, timed_out = None, False
        try:
            stream.send_stdin(options.get("stdin"))
            exit_code, timed_out = self._wait(container, exec_id, stream, started + timeout, cancel)
        finally:
            watch.close()
            unregister()
            stream.close()
            if exit_code is None or exit_code == 137:  # killed, maybe by the OOM killer
                self.pool.discard(container, "timed out" if timed_out else "killed or failed")
            else:
                self.pool.release(container)
        note = watch.shortage.stop_note() if watch.shortage is not None else ""
        ended = exit_code, timed_out
        return finished(argv, "docker", started, cancel, ended, stream.output.buffer, note)

    def _start(
        self, argv: list[str], cwd: Path, on_output: Callable[[str], None]
    ) -> tuple[Any, str, _ExecStream]:
        """Start `argv` in a pooled container; a container that cannot exec is replaced once."""
        error: DockerException | None = None
        for _ in range(2):
            container = self.pool.acquire()
            try:
                exec_id = self.client.api.exec_create(
                    container.id,
                    [*_WRAPPER, *argv],
                    stdin=True,
                    user=self.user,
                    workdir=str(container_path(self.settings.workspace, cwd)),
                    environment={
                        **named_variables(self.settings),
                        "HOME": "/tmp",
                        "PYTHONUNBUFFERED": "1",
                    },
                )["Id"]
                sock = self.client.api.exec_start(exec_id, socket=True)
            except DockerException as exc:
                self.pool.discard(container, "exec failed")
                error = exc
                continue
            stream = _ExecStream(sock, self.settings.output_limit_chars, on_output)
            return container, exec_id, stream
        raise SandboxUnavailable(f"could not run in a container: {error}") from error

    def _wait(
        self,
        container: Any,
        exec_id: str,
        stream: _ExecStream,
        deadline: float,
        cancel: CancelToken,
    ) -> tuple[int | None, bool]:
        """Pump output to the end, or kill the container at the deadline or on cancel;
        returns the exit code (None when killed) and whether time ran out."""
        output = stream.output
        finished = output.until(deadline, lambda: output.eof or cancel.cancelled)
        if finished and not cancel.cancelled:
            return self._exit_code(exec_id), False
        self._kill_soon(container)
        output.until(time.monotonic() + DRAIN_SECONDS, lambda: output.eof)
        return None, not finished

    def _exit_code(self, exec_id: str) -> int | None:
        deadline = time.monotonic() + EXIT_CODE_WAIT_SECONDS
        while True:
            with contextlib.suppress(DockerException):
                info = self.client.api.exec_inspect(exec_id)
                if not info.get("Running"):
                    return info.get("ExitCode")
            if time.monotonic() > deadline:
                return None
            time.sleep(0.01)

    def _kill_soon(self, container: Any) -> None:
        """Kill at once where this process may, and through the engine from a thread while
        the caller keeps reading: the engine may wait for the exec's output to drain before
        it answers."""
        self.pool.kill_now(container)

        def kill() -> None:
            with contextlib.suppress(DockerException):
                self.client.api.kill(container.id)

        threading.Thread(target=kill, name="sandbox-kill", daemon=True).start()

    def _describe(self) -> list[str]:
        o = self.settings.docker
        names = ", ".join(self.settings.command_env)
        network = "network: Docker's default network" if o.network else "network: none"
        return [
            network,
            f"filesystem: only the workspace (at {WORKDIR}) and a private /tmp are writable; "
            "nothing else of this machine is visible",
            f"user: commands run as {self.user}, without capabilities or privilege escalation",
            f"limits: {o.memory} memory, {o.cpus:g} CPU, {o.pids_limit} processes, "
            f"files up to {o.file_size_mb} MB",
            f"containers: image {o.image}, {o.pool_size} kept warm, each retired after "
            f"{o.max_uses} commands and replaced after a timeout, cancel or crash",
            "environment: nothing from this machine's environment"
            + (f" but AGENT_COMMAND_ENV's {names}" if names else ""),
        ]


def _warn_if_unwritable(settings: Settings) -> None:
    """As root with a root-owned workspace, commands run as 1000:1000 and may not write."""
    st = settings.workspace.stat()
    if settings.docker.user or os.getuid() != 0 or st.st_uid != 0 or st.st_mode & stat.S_IWOTH:
        return
    log.warning(
        "the workspace belongs to root, so sandboxed commands (uid 1000) may not write in it; "
        "chown it or set docker.user",
        extra={"fields": {"workspace": str(settings.workspace)}},
    )
