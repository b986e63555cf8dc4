"""The MCP client on our fixture server over stdio, HTTP and SSE: calls, failures, timeouts."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from modules.mcp.client import McpManager
from modules.results import ToolError
from tests.kit.mcp_servers import (
    FIXTURE,
    manager_for,
    running,
    stdio_entry,
    wait_started,
    write_config,
)
from tests.kit.server import free_port
from tests.kit.waits import wait_until
from utils.cancel import CancelToken, TaskCancelled


@pytest.fixture
def fixture_manager(tmp_path: Path) -> Iterator[tuple[McpManager, str]]:
    marker = f"mcp-{uuid.uuid4().hex[:8]}"
    manager = manager_for(tmp_path, {"fx": stdio_entry(marker, timeout=2)})
    manager.start()
    yield manager, marker
    manager.close()
    assert running(marker) == []


def test_a_stdio_server_gets_its_configured_env_and_a_small_base_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ACME_SERVICE_PASSWORD", "hunter2")
    monkeypatch.setenv("AGENT_API_KEY", "sk-not-for-servers")
    monkeypatch.setenv("LC_TIME", "C.UTF-8")
    marker = f"mcp-{uuid.uuid4().hex[:8]}"
    entry = stdio_entry(marker, env={"FIXTURE_KEY": "given"})
    manager = manager_for(tmp_path, {"fx": entry})
    manager.start()
    try:
        wait_started(manager)
        seen = manager.servers["fx"].call("environment", {}, CancelToken()).text
    finally:
        manager.close()
    names = {line.split("=", 1)[0] for line in seen.splitlines()}
    assert "FIXTURE_KEY=given" in seen and "LC_TIME=C.UTF-8" in seen and "PATH" in names
    assert "hunter2" not in seen and "sk-not-for-servers" not in seen


def test_stdio_tools_are_listed_namespaced_and_called_from_many_threads(fixture_manager):
    manager, marker = fixture_manager
    tools = wait_started(manager).tools()
    assert {"mcp__fx__echo", "mcp__fx__write_note", "mcp__fx__hang"} <= set(tools)
    echo, note = tools["mcp__fx__echo"], tools["mcp__fx__write_note"]
    assert echo.read_only and echo.asks == "never"
    assert not note.read_only and note.asks == "always"
    schema = echo.schema()["function"]
    assert schema["parameters"]["required"] == ["text"]
    assert "Say the text back." in schema["description"]
    results: list[str] = []

    def worker(i: int) -> None:
        results.append(manager.servers["fx"].call("echo", {"text": f"n{i}"}, CancelToken()).text)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert sorted(r.split(" ")[1] for r in results) == sorted(f"n{i}" for i in range(8))
    assert len(running(marker)) == 1  # one server process served them all
    with pytest.raises(ToolError, match="failed on purpose"):
        manager.servers["fx"].call("fail", {}, CancelToken())
    assert manager.servers["fx"].state == "connected"


def test_a_crashed_server_gives_an_error_leaves_no_process_and_restarts(fixture_manager):
    manager, marker = fixture_manager
    server = manager.servers["fx"]
    first_pid = server.call("echo", {"text": "hi"}, CancelToken()).text.split("pid ")[1]
    with pytest.raises(ToolError, match="stopped while running crash") as failure:
        server.call("crash", {}, CancelToken())
    assert "crashing on purpose" in str(failure.value)  # the server's own stderr
    assert server.state == "failed" and manager.status()["servers"][0]["state"] == "failed"
    wait_until(lambda: running(marker) == [], 10, "the crashed server's process to go")
    again = server.call("echo", {"text": "back"}, CancelToken()).text
    assert "echo: back" in again and again.split("pid ")[1] != first_pid
    assert server.state == "connected"


def test_a_server_killed_while_idle_shows_as_failed_and_the_next_call_restarts_it(
    fixture_manager,
):
    manager, marker = fixture_manager
    server = wait_started(manager).servers["fx"]
    assert server.state == "connected"
    [pid] = running(marker)
    os.kill(pid, signal.SIGKILL)
    wait_until(
        lambda: manager.status()["servers"][0]["state"] == "failed",
        30,
        "the status to show the killed server as failed",
    )
    assert server.error is not None and "closed the connection" in server.error
    again = server.call("echo", {"text": "back"}, CancelToken()).text  # the first call works
    assert "echo: back" in again and again.split("pid ")[1] != str(pid)
    assert server.state == "connected" and len(running(marker)) == 1


def test_a_hanging_call_times_out_and_a_cancel_stops_it_at_once(fixture_manager):
    manager, marker = fixture_manager
    server = wait_started(manager).servers["fx"]
    cancel = CancelToken()
    threading.Timer(0.3, cancel.cancel).start()
    started = time.monotonic()
    with pytest.raises(TaskCancelled):
        server.call("hang", {}, cancel)
    assert time.monotonic() - started < 1.5
    assert server.state == "connected"  # a cancelled call leaves the server alone
    started = time.monotonic()
    with pytest.raises(ToolError, match="did not answer hang within 2 s"):
        server.call("hang", {}, CancelToken())
    assert 1.9 < time.monotonic() - started < 4
    assert server.state == "failed" and "did not answer" in server.error
    wait_until(lambda: running(marker) == [], 10, "the hung server's process to be stopped")
    assert "echo: ok" in server.call("echo", {"text": "ok"}, CancelToken()).text


def test_a_broken_server_never_delays_start_and_says_why(tmp_path):
    manager = manager_for(
        tmp_path,
        {
            "missing": {"command": "no-such-mcp-server-command"},
            "dies": {
                "command": sys.executable,
                "args": ["-c", "import sys; sys.stderr.write('bad token\\n'); sys.exit(1)"],
            },
            "off": {"command": "whatever", "disabled": True},
        },
    )
    started = time.monotonic()
    manager.start()
    assert time.monotonic() - started < 0.5
    try:
        assert wait_started(manager).tools() == {}
        states = {s["name"]: s for s in manager.status()["servers"]}
        assert states["missing"]["state"] == "failed"
        assert "command not found" in states["missing"]["error"]
        assert states["dies"]["state"] == "failed" and "bad token" in states["dies"]["error"]
        assert states["off"]["state"] == "disabled"
        with pytest.raises(ToolError, match="not available"):
            manager.servers["missing"].call("x", {}, CancelToken())
    finally:
        manager.close()


@pytest.mark.parametrize("transport", ["http", "sse"])
def test_http_transports(tmp_path, transport):
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, str(FIXTURE), f"--{transport}", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    path = "/mcp" if transport == "http" else "/sse"
    manager = manager_for(
        tmp_path,
        {
            "web": {
                "url": f"http://127.0.0.1:{port}{path}",
                "type": transport,
                "headers": {"X-Test": "1"},
            }
        },
    )
    try:
        wait_until(lambda: _listening(port), 15, "the fixture HTTP server to listen")
        manager.start()
        assert "mcp__web__echo" in wait_started(manager).tools()
        result = manager.servers["web"].call("echo", {"text": "over http"}, CancelToken())
        assert "echo: over http" in result.text
        assert manager.status()["servers"][0]["target"] == f"http://127.0.0.1:{port}{path}"
    finally:
        manager.close()
        process.terminate()
        process.wait(5)


def _listening(port: int) -> bool:
    import socket

    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def test_no_orphan_when_this_process_is_killed(tmp_path):
    marker = f"mcp-orphan-{uuid.uuid4().hex[:8]}"
    config = write_config(tmp_path / "data" / "mcp.json", {"fx": stdio_entry(marker)})
    script = (
        "import sys, time; from pathlib import Path\n"
        "from modules.mcp.client import McpManager\nfrom modules.mcp.config import load_config\n"
        f"ws, data = Path({str(tmp_path / 'ws')!r}), Path({str(tmp_path / 'data')!r})\n"
        f"c = load_config(Path({str(config)!r}), ws / '.mcp.json', trust_workspace=False)\n"
        "m = McpManager(c, workspace=ws, data_dir=data)\n"
        "m.start()\nwhile m.servers['fx'].state == 'starting': time.sleep(0.05)\n"
        "print(len(m.tools()), flush=True); time.sleep(60)\n"
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", script],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parent.parent,
    )
    try:
        assert parent.stdout is not None and int(parent.stdout.readline()) > 0
        assert len(running(marker)) == 1
        os.kill(parent.pid, signal.SIGKILL)  # no close(), no atexit: the kernel must do it
        parent.wait(5)
        wait_until(lambda: running(marker) == [], 10, "the orphaned server to be killed")
    finally:
        parent.kill()
