"""AGENT_SESSION_NETWORK=outbound in the real server (`main.py web`, bubblewrap sessions): its
get_status says `outbound`, and a command the model runs reaches a listener on the host's
non-loopback address but neither the web server itself nor anything on the host's loopback,
by any address. The default says `off`."""

from __future__ import annotations

import shlex
import shutil
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse

import pytest

from tests.fake_llm import Call, FakeLLM, Reply
from tests.fake_llm.replies import RecordedRequest, Response
from tests.kit.clients import connected
from tests.kit.network import PROBE, host_addresses
from tests.kit.server import ServerProcess, serving

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(shutil.which("slirp4netns") is None, reason="slirp4netns is missing"),
]
TASK_SECONDS = 60


def run_what_is_asked(request: RecordedRequest) -> Response:
    """The model runs each message as a command, then says it is done."""
    last = request.messages[-1] if request.messages else {}
    if isinstance(last, dict) and last.get("role") == "tool":
        return Reply(content="done")
    return Reply(tool_calls=[Call("run_command", {"command": request.last_user_text})])


def start(tmp_path: Path, fake_llm: FakeLLM, network: str | None) -> Iterator[ServerProcess]:
    fake_llm.responder = run_what_is_asked
    env = {"AGENT_SANDBOX": "local"}
    if network is not None:
        env["AGENT_SESSION_NETWORK"] = network
    with serving(tmp_path, fake_llm, env, {}) as process:
        yield process


@pytest.fixture
def outbound_server(tmp_path: Path, fake_llm: FakeLLM) -> Iterator[ServerProcess]:
    yield from start(tmp_path, fake_llm, "outbound")


@pytest.fixture
def default_server(tmp_path: Path, fake_llm: FakeLLM) -> Iterator[ServerProcess]:
    yield from start(tmp_path, fake_llm, None)


def test_outbound_reaches_out_but_not_the_server_itself(outbound_server: ServerProcess) -> None:
    addresses = host_addresses()
    if not addresses:
        pytest.skip("this machine has no address but loopback's: nothing outside to reach")
    own_port = urlparse(outbound_server.url).port
    outside = socket.socket()
    outside.bind((addresses[0], 0))
    outside.listen(4)
    targets = [("127.0.0.1", own_port), ("10.0.2.2", own_port)]
    targets += [(address, own_port) for address in addresses]
    targets.append((addresses[0], outside.getsockname()[1]))
    args = " ".join(f"{host} {port}" for host, port in targets)
    command = f"{shlex.quote(sys.executable)} -c {shlex.quote(PROBE)} {args}"
    try:
        with connected(outbound_server.url) as client:
            sandbox = client.call("get_status")["sandbox"]
            if sandbox["kind"] != "bubblewrap":
                pytest.skip("bubblewrap is not usable here")
            assert sandbox["network"] == "outbound"
            assert sandbox["isolation"][0].startswith("network: outbound")
            cid = client.start(command)
            events = client.wait_done(cid, TASK_SECONDS)
    finally:
        outside.close()
    results = [e.payload for e in events if e.name == "tool" and e.payload["phase"] == "result"]
    assert len(results) == 1, events
    text = str(results[0])
    for host, port in targets[:-1]:
        assert f"{host} {port} refused" in text, text
    assert f"{addresses[0]} {targets[-1][1]} reached" in text, text


def test_the_default_is_off(default_server: ServerProcess) -> None:
    with connected(default_server.url) as client:
        sandbox = client.call("get_status")["sandbox"]
    if sandbox["kind"] != "bubblewrap":
        pytest.skip("bubblewrap is not usable here")
    assert sandbox["network"] == "off"
    assert sandbox["isolation"][0].startswith("network: cut")
