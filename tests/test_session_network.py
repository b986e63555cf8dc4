"""A bubblewrap session's network as AGENT_SESSION_NETWORK says: `off`, the session's own
loopback only; `outbound`, out through slirp4netns and never to the host's loopback services.
Real bubblewrap, real slirp4netns, real listeners on this machine.

This machine is offline, so "outbound works" is proved by what outbound means to the session:
a listener on one of the host's non-loopback addresses (where a listener on another machine
would be, as far as the session can tell) is reached through the user-mode stack; a listener
on the host's loopback is not, by any address, nor through slirp's gateway 10.0.2.2. DNS is
shown as configured (the session's resolv.conf names slirp's 10.0.2.3); no name is resolved.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from modules.sandbox.confinement import detect_confinement
from modules.sandbox.factory import network_of, runner_for, sessions_of, with_sessions
from modules.sandbox.local_runner import LocalRunner
from modules.sandbox.runner import CommandRunner, SandboxUnavailable
from modules.sandbox.session.network import SLIRP_DNS
from modules.sandbox.session.pool import SessionPool
from modules.sandbox.session.session import SandboxSession
from tests.kit.network import PROBE, host_addresses
from tests.kit.processes import live_command_lines
from tests.kit.tools import make_ctx
from tests.kit.waits import wait_until
from utils.cancel import CancelToken

ROOT = Path(__file__).resolve().parent.parent
needs_slirp = pytest.mark.skipif(
    shutil.which("slirp4netns") is None, reason="slirp4netns is not installed"
)


@pytest.fixture
def listeners() -> Iterator[dict[str, int]]:
    """A listener on the host's 127.0.0.1, and one on each of its other addresses: address ->
    port ("loopback" names the first)."""
    made = []
    ports = {}
    for name, address in [("loopback", "127.0.0.1"), *((a, a) for a in host_addresses())]:
        listener = socket.socket()
        listener.bind((address, 0))
        listener.listen(8)
        made.append(listener)
        ports[name] = listener.getsockname()[1]
    try:
        yield ports
    finally:
        for listener in made:
            listener.close()


def pool_of(tmp_path: Path, network: str) -> tuple[CommandRunner, SessionPool]:
    ctx = make_ctx(tmp_path, sandbox="local", session_network=network)
    runner = runner_for(ctx.settings)
    if runner.kind != "bubblewrap":
        runner.close()
        pytest.skip("bubblewrap is not installed or cannot create a sandbox here")
    pool = sessions_of(runner)
    assert pool is not None
    return runner, pool


@pytest.fixture
def off(tmp_path: Path) -> Iterator[SessionPool]:
    runner, pool = pool_of(tmp_path, "off")
    try:
        yield pool
    finally:
        runner.close()


@pytest.fixture
def outbound(tmp_path: Path) -> Iterator[SessionPool]:
    runner, pool = pool_of(tmp_path, "outbound")
    assert network_of(runner) == "outbound"
    assert any(line.startswith("network: outbound") for line in runner.isolation)
    try:
        yield pool
    finally:
        runner.close()


def probe(pool: SessionPool, session: SandboxSession, *targets: tuple[str, int]) -> list[str]:
    """Connect from the session to each (host, port): a line each, reached or refused."""
    args = [str(part) for target in targets for part in target]
    result = session.run([sys.executable, "-c", PROBE, *args], cwd=pool.settings.workspace,
                         timeout=30, cancel=CancelToken(), on_output=lambda _: None)  # fmt: skip
    assert result.exit_code == 0, result.output
    return result.output.splitlines()


def all_targets(ports: dict[str, int]) -> list[tuple[str, int]]:
    """The loopback listener by every way to the host, and each other listener directly."""
    loopback = ports["loopback"]
    ways = ["127.0.0.1", "10.0.2.2", *host_addresses()]
    others = [(address, port) for address, port in ports.items() if address != "loopback"]
    return [*((way, loopback) for way in ways), *others]


def test_off_is_the_sessions_own_loopback_only(off: SessionPool, listeners: dict[str, int]) -> None:
    session = off.session("conv-off")
    lines = probe(off, session, *all_targets(listeners))
    assert lines and all("refused" in line for line in lines), lines
    assert off.launcher.network == "off"


@needs_slirp
def test_outbound_reaches_out_but_never_the_hosts_loopback(
    outbound: SessionPool, listeners: dict[str, int]
) -> None:
    session = outbound.session("conv-out")
    lines = probe(outbound, session, *all_targets(listeners))
    for line in lines:
        _, port, outcome = line.split()[:3]
        on_loopback = int(port) == listeners["loopback"]
        assert outcome == ("refused" if on_loopback else "reached"), lines
    if not host_addresses():
        pytest.skip("this machine has no address but loopback's: nothing outside to reach")
    assert sum("reached" in line for line in lines) == len(host_addresses())


@needs_slirp
def test_outbound_names_slirps_dns_and_its_stack_ends_with_the_session(
    outbound: SessionPool,
) -> None:
    session = outbound.session("conv-dns")
    result = session.run(["cat", "/etc/resolv.conf"], cwd=outbound.settings.workspace,
                         timeout=10, cancel=CancelToken(), on_output=lambda _: None)  # fmt: skip
    assert result.output.strip() == f"nameserver {SLIRP_DNS}"
    stacks = slirp_processes()
    assert len(stacks) == 1, stacks
    outbound.end("conv-dns", "session_idle")
    wait_until(lambda: not slirp_processes(), 10, "the session's slirp4netns to end")


@needs_slirp
def test_a_killed_server_leaves_no_network_stack(tmp_path: Path) -> None:
    """The server killed with -9: slirp4netns sees its exit descriptor close and ends."""
    script = (
        "import sys; sys.path.insert(0, sys.argv[1])\n"
        "from pathlib import Path\n"
        "from modules.sandbox.factory import runner_for, sessions_of\n"
        "from tests.kit.tools import make_ctx\n"
        "ctx = make_ctx(Path(sys.argv[2]), sandbox='local', session_network='outbound')\n"
        "pool = sessions_of(runner_for(ctx.settings))\n"
        "pool.session('conv-killed')\n"
        "print('ready', flush=True)\n"
        "sys.stdin.read()\n"
    )
    server = subprocess.Popen([sys.executable, "-c", script, str(ROOT), str(tmp_path)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert server.stdout is not None
        assert server.stdout.readline().strip() == "ready"
        stacks = slirp_processes(server.pid)
        assert len(stacks) == 1, stacks
        server.send_signal(signal.SIGKILL)
        server.wait()
        wait_until(lambda: not (set(stacks) & set(live_command_lines())), 10, "slirp4netns")
    finally:
        server.kill()
        server.wait()


def test_without_slirp4netns_outbound_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ctx = make_ctx(tmp_path, sandbox="local", session_network="outbound")
    confinement = detect_confinement(ctx.settings.local_sandbox, ctx.settings.workspace)
    if confinement.bubblewrap is None:
        pytest.skip("bubblewrap is not installed or cannot create a sandbox here")
    monkeypatch.setenv("PATH", str(tmp_path))  # bubblewrap found, slirp4netns now missing
    with pytest.raises(SandboxUnavailable, match="needs slirp4netns") as raised:
        with_sessions(LocalRunner(ctx.settings, confinement))
    assert "apt-get install slirp4netns" in str(raised.value)


def slirp_processes(parent: int | None = None) -> dict[int, str]:
    """slirp4netns processes started by `parent` (this process by default)."""
    found = live_command_lines(os.getpid() if parent is None else parent)
    return {pid: line for pid, line in found.items() if "slirp4netns" in line.split()[0]}
