"""A Docker session: one container per conversation whose main process is the supervisor.

The supervisor (this package's supervisor.py, bind-mounted read-only) runs as the container's
PID 1, under the commands' user, with the same limits as a Docker command (no capabilities, no
privilege escalation, a read-only root, the memory, CPU, process and file size limits). It
listens on a Unix socket in a control folder of this machine bind-mounted into the container
(mode 0700, in a folder of this server's only: nobody else here reaches it), accepts this
server's one connection, then removes the socket and closes the listener before it starts
anything, so no command can connect. From then on it is the bubblewrap session's protocol:
descriptors cross the container's namespaces over SCM_RIGHTS (one kernel).

It ends as a bubblewrap session does: when its control socket closes (the session ends, or
this server dies), the supervisor exits, the kernel ends the container's PID namespace, and
the engine removes the container (`auto_remove`). A container left by a server that died
before its engine could is reaped at start (docker_pool.reap_orphans, by its label).

Network: none for `off`; for `outbound` (or docker.network), a bridge network of the sessions'
own whose containers cannot reach each other, never the host's network: the host's loopback
stays out of reach, its other addresses are reached as any machine on the network does.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import tempfile
import time
from pathlib import Path
from typing import Any

from docker.errors import APIError, DockerException, NotFound

from modules.sandbox.docker_pool import container_path, locked_down
from modules.sandbox.environment import named_variables
from modules.sandbox.runner import SandboxUnavailable
from modules.sandbox.session.launcher import SUPERVISOR, Launched, log_tail
from modules.sandbox.session.network import NetworkMode
from modules.sandbox.session.os_threads import original, sleep
from utils.settings import Settings

SUPERVISOR_IN_CONTAINER = "/agent/supervisor.py"
CONTROL_IN_CONTAINER = "/agent-ctl"
SESSION_NETWORK = "workspace-agent-sessions"
NETWORK_LABEL = "workspace-agent.session-network"
CONNECT_SECONDS = 30.0  # for a new container's supervisor to listen
CONNECT_POLL_SECONDS = 0.02
NETWORK_LINES: dict[NetworkMode, str] = {
    "off": "network: none (the session's own loopback only)",
    "outbound": f"network: outbound, through a Docker bridge network of the sessions' own "
    f"({SESSION_NETWORK}: no session reaches another); never the host's loopback services "
    "(this server, A2A, MCP, Redis); the host's other addresses as any machine on the network "
    "reaches them",
}
MEMORY = re.compile(r"(\d+)([bkmg]?)b?", re.IGNORECASE)


class DockerLauncher:
    """Starts a conversation's container, its supervisor listening once in a control folder."""

    kind = "docker"

    def __init__(self, settings: Settings, client: Any, user: str, owner: str) -> None:
        self.settings = settings
        self.client = client
        self.user = user  # uid:gid of the supervisor and every command
        self.owner = owner  # the containers' label: "<hostname>:<pid>"
        self.ids = _numeric_user(user)
        self.memory_mb = _megabytes(settings.docker.memory)
        outbound = settings.session_network == "outbound" or settings.docker.network
        self.network: NetworkMode = "outbound" if outbound else "off"
        self.network_name = own_network(client) if outbound else None
        self._environment = {
            **_image_environment(client, settings.docker.image),
            **named_variables(settings),
            "HOME": "/tmp",
            "PYTHONUNBUFFERED": "1",
        }
        self.control_root = Path(tempfile.mkdtemp(prefix="wa-ctl-"))  # 0700, this user's

    def environment(self) -> dict[str, str]:
        return dict(self._environment)

    def rlimits(self) -> dict[str, list[int]]:
        return {}  # the container's own limits bound every process in it

    def close(self) -> None:
        """Remove the control folders (every session has ended)."""
        shutil.rmtree(self.control_root, ignore_errors=True)

    def launch(self, log_path: Path) -> Launched:
        """Start the container and connect to its supervisor; SandboxUnavailable when either
        fails (what the container said goes to `log_path`)."""
        control = Path(tempfile.mkdtemp(dir=self.control_root))
        os.chown(control, *self.ids)  # the supervisor binds its socket here, as the user
        container = None
        try:
            container = _Container(self.client, self._run(control))
            sock = self._connect(control / "ctl.sock", container, log_path)
        except BaseException:
            if container is not None:
                container.kill()
            shutil.rmtree(control, ignore_errors=True)
            raise
        workspace = self.settings.workspace
        return Launched(
            sock,
            container,
            None,
            {},
            inside=lambda cwd: str(container_path(workspace, cwd)),
            cleanups=[lambda: shutil.rmtree(control, ignore_errors=True)],
        )

    def _run(self, control: Path) -> str:
        options = self.settings.docker
        python = options.python
        config = locked_down(options, self.settings.workspace, self.owner)
        config["volumes"] = {
            **config["volumes"],
            str(SUPERVISOR): {"bind": SUPERVISOR_IN_CONTAINER, "mode": "ro"},
            str(control): {"bind": CONTROL_IN_CONTAINER, "mode": "rw"},
        }
        listen = f"{CONTROL_IN_CONTAINER}/ctl.sock"
        config.update(
            entrypoint=[python, "-I", "-S", SUPERVISOR_IN_CONTAINER, "--listen", listen],
            command=[],
            init=False,  # the supervisor is PID 1: it reaps every orphan
            user=self.user,
        )
        config["network_mode"] = self.network_name or "none"
        try:
            container = self.client.containers.run(options.image, **config)
        except DockerException as exc:
            message = f"could not start a {options.image} container for the session: {exc}"
            raise SandboxUnavailable(message) from exc
        return str(container.id)

    def _connect(self, path: Path, container: _Container, log_path: Path) -> Any:
        """This server's one connection to the supervisor, once it listens."""
        sockets = original("socket")
        deadline = time.monotonic() + CONNECT_SECONDS
        checked = time.monotonic()
        while True:
            sock = sockets.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            try:
                sock.connect(str(path))
                return sock
            except OSError:
                sock.close()
            now = time.monotonic()
            if now - checked > 0.5:  # a container that ended will not listen
                checked = now
                if container.poll() is not None:
                    _keep_logs(container, log_path)
                    raise SandboxUnavailable(
                        "the session's container ended before its supervisor listened"
                        + log_tail(log_path)
                    )
            if now > deadline:
                raise SandboxUnavailable("the session's container did not listen in time")
            sleep(CONNECT_POLL_SECONDS)


class _Container:
    """A session's container as the outer process of its sandbox (Launched.process)."""

    def __init__(self, client: Any, container_id: str) -> None:
        self.client = client
        self.id = container_id
        self.returncode: int | None = None

    def poll(self) -> int | None:
        """Its exit code once it ended (0 once the engine removed it), else None."""
        if self.returncode is not None:
            return self.returncode
        try:
            state = self.client.api.inspect_container(self.id)["State"]
        except NotFound:
            self.returncode = 0
            return 0
        except DockerException:
            return None
        if state.get("Running") or state.get("Status") in ("created", "restarting"):
            return None
        self.returncode = int(state.get("ExitCode") or 0)
        return self.returncode

    def kill(self) -> None:
        """Remove it with everything in it."""
        with contextlib.suppress(DockerException):
            self.client.api.remove_container(self.id, force=True)
        self.returncode = -9 if self.returncode is None else self.returncode


def own_network(client: Any) -> str:
    """The sessions' bridge network (made when missing): no container on it reaches another.
    SandboxUnavailable when a network of that name is not ours."""
    options = {"com.docker.network.bridge.enable_icc": "false"}
    for _ in range(2):
        try:
            network = client.networks.get(SESSION_NETWORK)
        except NotFound:
            with contextlib.suppress(APIError):  # made by another server meanwhile
                client.networks.create(SESSION_NETWORK, driver="bridge", options=options,
                                       labels={NETWORK_LABEL: "1"})  # fmt: skip
            continue
        except DockerException as exc:
            raise SandboxUnavailable(f"the sessions' Docker network: {exc}") from exc
        attrs = network.attrs
        if (attrs.get("Labels") or {}).get(NETWORK_LABEL) != "1" or attrs.get("Options") != options:
            raise SandboxUnavailable(
                f"a Docker network named {SESSION_NETWORK} exists and is not the sessions' own "
                f"(a bridge with enable_icc false, labelled {NETWORK_LABEL}); remove it"
            )
        return SESSION_NETWORK
    raise SandboxUnavailable(f"the Docker network {SESSION_NETWORK} could not be made")


def _image_environment(client: Any, image: str) -> dict[str, str]:
    """The image's own environment (its PATH among it)."""
    try:
        listed = client.images.get(image).attrs.get("Config", {}).get("Env") or []
    except DockerException as exc:
        raise SandboxUnavailable(f"the sandbox image {image}: {exc}") from exc
    found = dict(entry.partition("=")[::2] for entry in listed if "=" in entry)
    return found or {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}


def _numeric_user(user: str) -> tuple[int, int]:
    """uid and gid of `user` ("uid:gid" or "uid"): the control folder is made theirs."""
    uid, _, gid = user.partition(":")
    if not uid.isdigit() or not (gid or uid).isdigit():
        raise SandboxUnavailable(
            f"Docker sessions need docker.user as numbers (uid:gid), not {user[:40]!r}"
        )
    return int(uid), int(gid or uid)


def _megabytes(memory: str) -> int:
    """Docker's memory syntax (512m, 2g, 1048576) in MB."""
    match = MEMORY.fullmatch(memory.strip())
    if match is None:
        return 0
    scale = {"": 1, "b": 1, "k": 1024, "m": 1024**2, "g": 1024**3}[match[2].lower()]
    return int(match[1]) * scale // (1024 * 1024)


def _keep_logs(container: _Container, log_path: Path) -> None:
    with contextlib.suppress(DockerException, OSError):
        logs = container.client.api.logs(container.id, stdout=True, stderr=True, tail=20)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(log_path, "ab") as file:
            file.write(logs)
