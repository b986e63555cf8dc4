"""run_command and run_python in the conversation's sandbox session, as the server's services
build them: what one command leaves running answers the next, and their results say so. Real
bubblewrap (skipped where it cannot make a sandbox), real processes."""

from __future__ import annotations

import re
import shlex
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.services import AgentServices, build_services
from modules.sandbox.factory import sessions_of
from modules.tools.tool_context import ToolContext
from tests.kit.processes import live_command_lines
from tests.kit.settings import make_settings
from tests.kit.tools import call, make_ctx
from tests.kit.waits import wait_until

LEFT = r"left running in the background: (p\d+) `([^`]*)` \(pid (\d+), listening on (\d+)\)"


@pytest.fixture
def services(tmp_path: Path) -> Iterator[AgentServices]:
    """The services a server builds, on a local sandbox."""
    (tmp_path / "ws").mkdir()
    built = build_services(make_settings(None, tmp_path, sandbox="local"))
    if built.runner.kind != "bubblewrap":
        built.close()
        pytest.skip("bubblewrap is not installed or cannot create a sandbox here")
    try:
        yield built
    finally:
        built.close()


def ctx_for(services: AgentServices, conversation_id: str) -> ToolContext:
    """A tool context of the conversation, as a task gives its tools."""
    ctx = make_ctx(services.settings.workspace.parent)
    ctx.settings, ctx.runner, ctx.conversation_id = (
        services.settings,
        services.runner,
        conversation_id,
    )
    return ctx


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_server_one_command_leaves_running_answers_the_next(services: AgentServices) -> None:
    """The issue's scenario: `python3 -m http.server PORT &`, then a request from the next
    command; the first result says what was left running, and where."""
    ctx = ctx_for(services, "conv-app")
    port = free_port()
    started = call(ctx, "run_command", command=f"python3 -m http.server {port} &")
    assert started.ok, started.output
    found = re.search(LEFT, started.output)
    assert found, started.output
    assert found[2] == f"python3 -m http.server {port}" and found[4] == str(port)
    assert "process_output" in started.output and "process_stop" in started.output
    fetch = f"import urllib.request as u; print(u.urlopen('http://127.0.0.1:{port}/').status)"
    answered = call(ctx, "run_command", command=f"python3 -c {shlex.quote(fetch)}")
    assert answered.ok and "200" in answered.output, answered.output
    with pytest.raises(OSError):  # the session's loopback is not the host's
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    session = ctx.session
    assert session is not None
    assert [(i.record.id, i.ports) for i in session.processes()] == [(found[1], (port,))]


def test_run_python_runs_in_the_same_session(services: AgentServices) -> None:
    ctx = ctx_for(services, "conv-py")
    assert call(ctx, "run_command", command="echo from-bash > /tmp/shared").ok
    result = call(ctx, "run_python", code="print(open('/tmp/shared').read().strip())")
    assert result.ok and "from-bash" in result.output, result.output


def test_a_one_shot_run_says_its_background_processes_end_with_it(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    services = build_services(make_settings(None, tmp_path, sandbox="local"), ends_with_run=True)
    try:
        if services.runner.kind != "bubblewrap":
            pytest.skip("bubblewrap is not installed or cannot create a sandbox here")
        result = call(ctx_for(services, "conv-once"), "run_command", command="sleep 340 &")
        assert result.ok and "background processes stop with it" in result.output, result.output
    finally:
        services.close()
    assert not any("sleep 340" in line for line in live_command_lines().values())


def test_deleting_a_conversation_ends_its_processes(services: AgentServices) -> None:
    conversation = services.store.create("with a process")
    ctx = ctx_for(services, conversation.id)
    assert re.search(
        r"left running.*`sleep 350`", call(ctx, "run_command", command="sleep 350 &").output
    )
    services.delete_conversation(conversation.id)
    folder = services.settings.data_dir / "processes" / conversation.id
    assert not folder.exists()
    lines = live_command_lines().values
    wait_until(lambda: not any("sleep 350" in line for line in lines()), 5, "its process's end")
    sessions = sessions_of(services.runner)
    assert sessions is not None and sessions.existing(conversation.id) is None
