"""Docker sessions against a real engine with the locally built test image: one container per
conversation whose PID 1 is the supervisor, reached over a Unix socket it removes once this
server connected. The bubblewrap session's scenario holds: a background server, reached by a
later command, two conversations each on :8000; and the container goes with its session, its
server, or at the next start when its server died unseen. Network: none for `off`, a bridge
of the sessions' own for `outbound` (the host's loopback never reached)."""

from __future__ import annotations

import functools
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from modules.sandbox.docker_pool import LABEL
from modules.sandbox.factory import network_of, runner_for, sessions_of
from modules.sandbox.runner import CommandResult, CommandRunner
from modules.sandbox.session.docker_launcher import DockerLauncher
from modules.sandbox.session.pool import SessionPool
from modules.sandbox.session.session import SandboxSession
from tests.kit.network import PROBE
from tests.kit.sandbox_image import SANDBOX_UID, build_test_image, docker_client_or_skip
from tests.kit.settings import make_settings
from tests.kit.waits import wait_until
from utils.cancel import CancelToken

ROOT = Path(__file__).resolve().parent.parent
SERVE_8000 = "python -m http.server 8000 --bind 127.0.0.1"
FETCH = (
    'python -c "import urllib.request as u; '
    "print(u.urlopen('http://127.0.0.1:8000/', timeout=5).read().decode())\""
)
GATEWAY = """
import socket, struct
routes = [line.split() for line in open("/proc/net/route").read().splitlines()[1:]]
gateways = [r[2] for r in routes if r[1] == "00000000"]
print(socket.inet_ntoa(struct.pack("<I", int(gateways[0], 16))) if gateways else "none")
"""


@pytest.fixture(scope="module")
def engine() -> tuple[Any, str]:
    client = docker_client_or_skip()
    return client, build_test_image(client)


def settings_for(tmp_path: Path, image: str, **overrides: Any) -> Any:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    if os.geteuid() == 0:
        os.chown(ws, SANDBOX_UID, SANDBOX_UID)
    docker = {"image": image, "pool_size": 0}
    return make_settings(None, tmp_path, sandbox="docker", docker=docker, **overrides)


@pytest.fixture
def make_pool(engine: tuple[Any, str], tmp_path: Path) -> Iterator[Any]:
    """A factory of Docker runners with sessions (closed after the test): their pools."""
    made: list[CommandRunner] = []

    def make(**overrides: Any) -> SessionPool:
        runner = runner_for(settings_for(tmp_path, engine[1], **overrides))
        made.append(runner)
        pool = sessions_of(runner)
        assert pool is not None and isinstance(pool.launcher, DockerLauncher)
        assert network_of(runner) == pool.launcher.network
        return pool

    yield make
    for runner in made:
        runner.close()


def run(
    pool: SessionPool, session: SandboxSession, command: str, stdin: str | None = None
) -> CommandResult:
    return session.run(["bash", "-c", command], cwd=pool.settings.workspace, timeout=30,
                       cancel=CancelToken(), on_output=lambda _: None, stdin=stdin)  # fmt: skip


def listens_on_8000(session: SandboxSession) -> bool:
    return 8000 in {port.port for port in session.sandbox.ports()}


def containers(client: Any, owner_pid: int | None = None) -> list[dict[str, Any]]:
    """Sandbox containers on this engine (those of the server `owner_pid`, if given)."""
    found = client.api.containers(all=True, filters={"label": LABEL})
    if owner_pid is None:
        return list(found)
    return [c for c in found if c["Labels"][LABEL].endswith(f":{owner_pid}")]


def test_a_session_is_one_container_whose_pid_1_is_the_supervisor(
    make_pool: Any, engine: tuple[Any, str]
) -> None:
    pool = make_pool()
    session = pool.session("conv-docker")
    pid_1 = "python -c \"print(open('/proc/1/cmdline').read().replace(chr(0), ' '))\""
    host = 'python -c "import socket; print(socket.gethostname())"'
    result = run(pool, session, f"id -u; pwd; {pid_1}; {host}; ls /agent-ctl")
    lines = result.output.splitlines()
    assert result.exit_code == 0, result.output
    assert lines[0] == str(SANDBOX_UID)
    assert lines[1] == "/workspace"
    assert "/agent/supervisor.py --listen /agent-ctl/ctl.sock" in lines[2]
    assert lines[3] == "workspace"  # not this machine's name
    assert len(lines) == 4, lines  # the socket is gone: no command can connect
    mine = containers(engine[0], os.getpid())
    assert len(mine) == 1
    config = engine[0].api.inspect_container(mine[0]["Id"])["HostConfig"]
    assert config["CapDrop"] == ["ALL"] and config["ReadonlyRootfs"] is True
    assert config["NetworkMode"] == "none" and config["PidsLimit"] > 0
    assert "no-new-privileges" in config["SecurityOpt"]


def test_a_background_server_is_reached_later_and_two_conversations_share_port_8000(
    make_pool: Any, engine: tuple[Any, str]
) -> None:
    pool = make_pool()
    one, two = pool.session("conv-a"), pool.session("conv-b")
    for session in (one, two):
        started = session.start(SERVE_8000, pool.settings.workspace, settle=15)
        assert started.info.record.running, started
        wait_until(functools.partial(listens_on_8000, session), 15, ":8000")
    (pool.settings.workspace / "hello.txt").write_text("hi")
    for session in (one, two):
        fetched = run(pool, session, FETCH)
        assert "hello.txt" in fetched.output, fetched.output
    ids = [c["Id"] for c in containers(engine[0], os.getpid())]
    assert len(ids) == 2
    pool.end("conv-a", "conversation_deleted")
    wait_until(lambda: len(containers(engine[0], os.getpid())) == 1, 20, "conv-a's container")
    assert "hello.txt" in run(pool, two, FETCH).output


@pytest.mark.host_network
def test_outbound_is_a_bridge_of_its_own_that_never_reaches_the_hosts_loopback(
    make_pool: Any, engine: tuple[Any, str]
) -> None:
    pool = make_pool(session_network="outbound")
    session = pool.session("conv-out")
    gateway = run(pool, session, f"python -c '{GATEWAY}'").output.strip()
    assert gateway != "none", "no route out of the sessions' network"
    loopback, outside = socket.socket(), socket.socket()
    loopback.bind(("127.0.0.1", 0))
    outside.bind((gateway, 0))  # the host's own address on the sessions' bridge
    for listener in (loopback, outside):
        listener.listen(4)
    try:
        ports = loopback.getsockname()[1], outside.getsockname()[1]
        probe = f"python - {gateway} {ports[0]} 127.0.0.1 {ports[0]} {gateway} {ports[1]}"
        result = run(pool, session, probe, stdin=PROBE)
    finally:
        loopback.close()
        outside.close()
    lines = result.output.splitlines()
    assert [line.split()[2] for line in lines] == ["refused", "refused", "reached"], lines
    network = engine[0].networks.get("workspace-agent-sessions").attrs
    assert network["Options"]["com.docker.network.bridge.enable_icc"] == "false"


def test_a_killed_servers_container_goes_with_it(engine: tuple[Any, str], tmp_path: Path) -> None:
    client, image = engine
    script = (
        "import sys; sys.path.insert(0, sys.argv[1])\n"
        "from pathlib import Path\n"
        "from modules.sandbox.factory import runner_for, sessions_of\n"
        "from tests.kit.settings import make_settings\n"
        "docker = {'image': sys.argv[3], 'pool_size': 0}\n"
        "s = make_settings(None, Path(sys.argv[2]), sandbox='docker', docker=docker)\n"
        "sessions_of(runner_for(s)).session('conv-killed')\n"
        "print('ready', flush=True)\n"
        "sys.stdin.read()\n"
    )
    settings_for(tmp_path, image)  # the workspace, writable by the sandbox's user
    server = subprocess.Popen([sys.executable, "-c", script, str(ROOT), str(tmp_path), image],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert server.stdout is not None
        assert server.stdout.readline().strip() == "ready"
        assert len(containers(client, server.pid)) == 1
        server.send_signal(signal.SIGKILL)
        server.wait()
        wait_until(lambda: not containers(client, server.pid), 30, "the dead server's container")
    finally:
        server.kill()
        server.wait()
