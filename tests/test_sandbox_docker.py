"""The Docker sandbox against a real engine, with a locally built image (skipped without one)."""

from __future__ import annotations

import os
import re
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from modules.sandbox.docker_pool import LABEL
from modules.sandbox.docker_runner import DockerRunner
from modules.sandbox.factory import build_runner
from modules.sandbox.runner import CommandResult, SandboxUnavailable
from tests.kit.sandbox_image import SANDBOX_UID, build_test_image, docker_client_or_skip
from tests.kit.settings import make_settings
from tests.kit.tools import call, make_ctx
from tests.kit.waits import wait_until
from utils.cancel import CancelToken, TaskCancelled
from utils.settings import Settings

# Connects to the host through the container's default gateway, read from /proc/net/route.
CONNECT_TO_HOST = """
import socket, struct, sys
routes = [line.split() for line in open("/proc/net/route").read().splitlines()[1:]]
gateways = [r[2] for r in routes if r[1] == "00000000"]
if not gateways:
    print("no route out"); sys.exit(0)
host = socket.inet_ntoa(struct.pack("<I", int(gateways[0], 16)))
try:
    socket.create_connection((host, int(sys.argv[1])), timeout=3).close()
    print("connected")
except OSError as exc:
    print("refused:", exc)
"""


@pytest.fixture(scope="module")
def engine() -> tuple[Any, str]:
    """The docker client and the test image, built once and cached by the engine."""
    client = docker_client_or_skip()
    return client, build_test_image(client)


def docker_settings(tmp_path: Path, image: str, **docker: Any) -> Settings:
    """Settings for a workspace the sandbox user may write (chowned when we are root)."""
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    if os.geteuid() == 0:
        os.chown(ws, SANDBOX_UID, SANDBOX_UID)
    options = {"image": image, "pool_size": 2, "max_uses": 3, **docker}
    return make_settings(None, tmp_path, sandbox="docker", docker=options, output_limit_chars=5000)


@pytest.fixture
def make_runner(engine: tuple[Any, str], tmp_path: Path) -> Iterator[Any]:
    """A factory of DockerRunners on tmp_path/ws, all closed after the test."""
    client, image = engine
    made: list[DockerRunner] = []

    def make(**docker: Any) -> DockerRunner:
        runner = DockerRunner(docker_settings(tmp_path, image, **docker), client)
        made.append(runner)
        return runner

    yield make
    for runner in made:
        runner.close()


@pytest.fixture
def runner(make_runner: Any) -> DockerRunner:
    return make_runner()


def run(
    runner: DockerRunner,
    command: str,
    *,
    timeout: float = 20,
    cancel: CancelToken | None = None,
    on_output: Any = None,
    stdin: str | None = None,
    argv: list[str] | None = None,
) -> CommandResult:
    return runner.run(
        argv or ["bash", "-c", command],
        cwd=runner.settings.workspace,
        timeout=timeout,
        cancel=cancel or CancelToken(),
        on_output=on_output or (lambda _: None),
        stdin=stdin,
    )


def container_of(runner: DockerRunner) -> str:
    """The short id of the container that ran a command, read from the source of its
    /etc/hostname mount (the host name is the sandbox's own, the same in every container)."""
    mounts = run(runner, "cat /proc/self/mountinfo").output
    found = re.search(r"/containers/([0-9a-f]{64})/hostname ", mounts)
    assert found is not None, mounts
    return found[1][:12]


def gone(client: Any, container_id: str, within: float = 10) -> bool:
    return wait_until(
        lambda: not client.api.containers(all=True, filters={"id": container_id}),
        within,
        f"container {container_id} to go",
        every=0.1,
    )


def test_pool_warms_up_locked_down_containers(runner: DockerRunner, engine: Any) -> None:
    client, image = engine
    assert runner.kind == "docker" and runner.python == "python"
    assert runner.pool.wait_ready(30) and len(runner.pool.idle) == 2
    info = client.api.inspect_container(runner.pool.idle[0])
    host = info["HostConfig"]
    assert info["Config"]["Image"] == image and info["Config"]["NetworkDisabled"] is True
    assert host["ReadonlyRootfs"] and host["CapDrop"] == ["ALL"] and host["Init"]
    assert host["SecurityOpt"] == ["no-new-privileges"]
    assert host["Memory"] == 512 * 1024 * 1024 and host["NanoCpus"] == 1_000_000_000
    assert host["PidsLimit"] == 256 and "/tmp" in host["Tmpfs"]
    assert info["Config"]["Labels"][LABEL].endswith(f":{os.getpid()}")
    assert "network: none" in runner.isolation


def test_containers_are_reused_then_retired(runner: DockerRunner, engine: Any) -> None:
    client, _ = engine
    assert runner.pool.wait_ready(30)
    first = {container_of(runner) for _ in range(3)}
    assert len(first) == 1  # max_uses=3: the same warm container three times
    (short_id,) = first
    assert container_of(runner) != short_id
    assert gone(client, short_id)


@pytest.mark.host_network
def test_network_is_disabled(make_runner: Any) -> None:
    server = socket.create_server(("0.0.0.0", 0))
    server.listen(8)
    port = str(server.getsockname()[1])
    probe = ["python", "-", port]
    try:
        closed = run(make_runner(), "", argv=probe, stdin=CONNECT_TO_HOST)
        opened = run(make_runner(network=True), "", argv=probe, stdin=CONNECT_TO_HOST)
    finally:
        server.close()
    assert "no route out" in closed.output
    assert "connected" in opened.output, opened.output


def test_read_only_root_non_root_user_and_workspace(runner: DockerRunner) -> None:
    result = run(runner, "id -u; touch /etc/probe; touch /tmp/ok && echo tmp-ok; echo hi > out.txt")
    lines = result.output.splitlines()
    # stdout and stderr reach Docker through two pipes: their lines may come in either order
    assert str(SANDBOX_UID) in lines
    assert "Read-only file system" in result.output and "tmp-ok" in lines
    out = runner.settings.workspace / "out.txt"
    assert out.read_text() == "hi\n" and out.stat().st_uid == SANDBOX_UID


def test_run_python_tool_uses_the_image_python(runner: DockerRunner, tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    ctx.runner = runner
    result = call(ctx, "run_python", code="import os, sys\nprint(os.getcwd(), os.getuid())")
    assert result.ok, result.output
    assert f"/workspace {SANDBOX_UID}" in result.output


def test_timeout_kills_and_replaces_the_container(runner: DockerRunner, engine: Any) -> None:
    client, _ = engine
    assert runner.pool.wait_ready(30)
    victim = container_of(runner)
    started = time.monotonic()
    result = run(runner, "sleep 60", timeout=1)
    assert result.timed_out and result.exit_code is None
    assert time.monotonic() - started < 3
    assert gone(client, victim)
    assert runner.pool.wait_ready(30) and victim not in {c[:12] for c in runner.pool.idle}


def test_cancel_stops_within_a_second(runner: DockerRunner) -> None:
    assert runner.pool.wait_ready(30)
    cancel = CancelToken()
    threading.Timer(0.5, cancel.cancel).start()
    started = time.monotonic()
    with pytest.raises(TaskCancelled):
        run(runner, "sleep 60", cancel=cancel)
    assert time.monotonic() - started < 1.5


def test_output_streams_before_the_end(runner: DockerRunner) -> None:
    arrivals: list[tuple[float, str]] = []
    started = time.monotonic()
    code = "import time\nprint('first', flush=True)\ntime.sleep(1)\nprint('last')"
    result = run(
        runner, "", argv=["python", "-"], stdin=code,
        on_output=lambda text: arrivals.append((time.monotonic(), text)),
    )  # fmt: skip
    ended = time.monotonic()
    assert result.exit_code == 0 and "first\nlast\n" in result.output
    first_at = next(t for t, text in arrivals if "first" in text)
    assert first_at - started < ended - started - 0.7


def test_output_is_capped(runner: DockerRunner) -> None:
    seen = 0

    def count(text: str) -> None:
        nonlocal seen
        seen += len(text)

    result = run(runner, "yes | head -c 2000000", on_output=count)
    assert result.exit_code == 0 and seen == 2_000_000
    assert len(result.output) <= runner.settings.output_limit_chars + 100
    assert result.omitted_chars > 1_900_000 and result.output.startswith("y\ny\n")


def test_out_of_memory_is_killed_and_replaced(runner: DockerRunner, engine: Any) -> None:
    client, _ = engine
    victim = container_of(runner)
    code = "chunks = []\nwhile True:\n    chunks.append(bytearray(64 * 1024 * 1024))"
    result = run(runner, "", argv=["python", "-"], stdin=code)
    assert result.exit_code not in (0, None)
    assert gone(client, victim)


def test_close_removes_every_container(make_runner: Any, engine: Any) -> None:
    client, _ = engine
    runner = make_runner()
    assert runner.pool.wait_ready(30)
    run(runner, "true")
    runner.close()
    owner = f"{LABEL}={runner.pool.owner}"
    assert not client.api.containers(all=True, filters={"label": owner})


def test_build_runner_picks_docker_when_the_image_is_here(tmp_path: Path, engine: Any) -> None:
    _, image = engine
    settings = docker_settings(tmp_path, image).model_copy(update={"sandbox": "auto"})
    runner = build_runner(settings)
    try:
        assert runner.kind == "docker"
    finally:
        runner.close()
    missing = docker_settings(tmp_path, "workspace-agent-missing:none")
    auto = build_runner(missing.model_copy(update={"sandbox": "auto"}))
    assert auto.kind in {"bubblewrap", "local"}


def test_without_an_engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    settings = docker_settings(tmp_path, "python:3.11-slim")
    with pytest.raises(SandboxUnavailable, match="Docker is not usable"):
        build_runner(settings)
    assert build_runner(settings.model_copy(update={"sandbox": "auto"})).kind != "docker"
