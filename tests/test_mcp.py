"""The MCP client: configuration, connections over stdio, streamable HTTP and SSE to a fixture
server of our own, failures, timeouts, cancellation, approvals, `/mcp` and the status."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cli.session import run_command
from cli.terminal import CliTerminal
from core.agent_specs import AgentSpec
from core.approval import ApprovalGate
from core.services import build_services
from modules.mcp.client import McpManager, build_manager
from modules.mcp.config import ServerConfig, ServerEntry, load_config, tool_name
from modules.results import ToolError
from tests.fake_llm import Call, Reply
from tests.helpers import live_command_lines, make_terminal, run_in_thread
from tests.kit import wait_until
from tests.web_helpers import EventClient, ServerProcess, free_port
from utils.cancel import CancelToken, TaskCancelled
from utils.settings import Settings

FIXTURE = Path(__file__).resolve().parent / "mcp_fixture_server.py"


def stdio_entry(marker: str, **extra: Any) -> dict[str, Any]:
    return {"command": sys.executable, "args": [str(FIXTURE), "--marker", marker], **extra}


def write_config(path: Path, servers: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


def manager_for(tmp_path: Path, servers: dict[str, Any]) -> McpManager:
    config = load_config(
        write_config(tmp_path / "data" / "mcp.json", servers),
        tmp_path / "ws" / ".mcp.json",
        trust_workspace=False,
    )
    (tmp_path / "ws").mkdir(exist_ok=True)
    return McpManager(config, workspace=tmp_path / "ws", logs=tmp_path / "data" / "logs")


def wait_started(manager: McpManager) -> McpManager:
    """Wait until no server is still starting (a loaded machine can take longer than the
    first listing waits)."""
    wait_until(
        lambda: all(s.state != "starting" for s in manager.servers.values()),
        30,
        "the MCP servers to start",
    )
    return manager


def entry_of(server: ServerConfig) -> ServerEntry:
    """The entry of a server whose configuration was read (None only for one that was not)."""
    assert server.entry is not None, server.problem
    return server.entry


def problem_of(server: ServerConfig) -> str:
    """What keeps a server from starting, for one the test knows has a problem."""
    assert server.problem is not None
    return server.problem


def running(marker: str) -> list[int]:
    return [pid for pid, argv in live_command_lines().items() if marker in argv]


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


def test_config_reads_the_claude_desktop_and_cline_formats(tmp_path, monkeypatch):
    monkeypatch.setenv("FIXTURE_TOKEN", "s3cret")
    user = write_config(
        tmp_path / "user.json",
        {
            "files": {
                "command": "npx",
                "args": ["-y", "server"],
                "env": {"KEY": "${FIXTURE_TOKEN}"},
                "alwaysAllow": ["read"],
                "disabled": True,
            },
            "remote": {
                "url": "https://example.test/mcp",
                "headers": {"X": "${MISSING:-fallback}"},
                "allowedTools": ["search_*"],
                "timeout": 5,
            },
            "old": {"url": "http://127.0.0.1:1/sse", "type": "sse"},
            "cline": {"url": "http://127.0.0.1:1/mcp", "type": "streamableHttp"},
            "broken": {"args": ["x"]},
            "unset": {"command": "${NOT_SET_ANYWHERE}"},
        },
    )
    config = load_config(user, tmp_path / ".mcp.json", trust_workspace=False)
    servers = config.servers
    assert entry_of(servers["files"]).env == {"KEY": "s3cret"}
    assert entry_of(servers["files"]).always_allow == ["read"]
    assert not servers["files"].enabled
    assert entry_of(servers["remote"]).transport == "http"
    assert entry_of(servers["remote"]).headers == {"X": "fallback"}
    assert entry_of(servers["remote"]).allowed_tools == ["search_*"]
    assert entry_of(servers["old"]).transport == "sse"
    assert entry_of(servers["cline"]).transport == "http"
    broken = problem_of(servers["broken"])
    assert str(user) in broken and "command" in broken
    assert "NOT_SET_ANYWHERE" in problem_of(servers["unset"])
    (tmp_path / "bad.json").write_text("{not json")
    bad = load_config(tmp_path / "bad.json", tmp_path / ".mcp.json", trust_workspace=False)
    assert bad.servers == {} and str(tmp_path / "bad.json") in bad.problems[0]["path"]


def test_workspace_servers_start_only_when_trusted_and_the_users_file_wins(tmp_path):
    workspace = tmp_path / "ws"
    write_config(
        workspace / ".mcp.json",
        {"mine": {"command": "evil"}, "both": {"command": "from-workspace"}},
    )
    user = write_config(tmp_path / "user.json", {"both": {"command": "from-user"}})
    untrusted = load_config(user, workspace / ".mcp.json", trust_workspace=False)
    assert not untrusted.servers["mine"].enabled
    assert "AGENT_MCP_TRUST_WORKSPACE" in problem_of(untrusted.servers["mine"])
    assert entry_of(untrusted.servers["both"]).command == "from-user"
    assert untrusted.servers["both"].enabled
    assert load_config(user, workspace / ".mcp.json", trust_workspace=True).servers["mine"].enabled


def test_tool_names_are_namespaced_short_stable_and_distinct():
    assert tool_name("github", "create_issue") == "mcp__github__create_issue"
    long = tool_name("a-very-long-server-name-indeed", "and_an_even_longer_tool_name_here_too")
    assert len(long) == 64 and long == tool_name(
        "a-very-long-server-name-indeed", "and_an_even_longer_tool_name_here_too"
    )
    cleaned = {tool_name("a.b", "x"), tool_name("a_b", "x"), tool_name("a b", "x")}
    assert len(cleaned) == 3
    assert all(len(n) <= 64 and n.replace("_", "").replace("-", "").isalnum() for n in cleaned)
    spec = AgentSpec(name="gh", description="d", tools=["read_file", "mcp__github__*"])
    assert spec.allows("mcp__github__create_issue") and not spec.allows("mcp__gitlab__x")


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
        f"c = load_config(Path({str(config)!r}), Path({str(tmp_path)!r}) / 'none.json', "
        "trust_workspace=False)\n"
        f"m = McpManager(c, workspace=Path({str(tmp_path)!r}), logs=Path({str(tmp_path)!r}))\n"
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


def test_mcp_tools_follow_the_approval_mode_in_the_agent_loop(fake_llm, tmp_path):
    marker = f"mcp-{uuid.uuid4().hex[:8]}"
    write_config(tmp_path / "data" / "mcp.json", {"fx": stdio_entry(marker)})
    terminal = make_terminal(fake_llm, tmp_path, approval="ask")
    try:
        mcp = terminal.services.mcp
        assert mcp is not None  # built since data/mcp.json exists
        wait_started(mcp)
        fake_llm.script(
            Reply(
                tool_calls=[
                    Call("mcp__fx__echo", {"text": "a"}),
                    Call("mcp__fx__write_note", {"text": "b"}),
                ]
            ),
            Reply(content="done"),
        )
        thread = run_in_thread(terminal, "use the fixture")
        waiting = terminal.wait_for("tool", phase="approval")
        assert waiting["name"] == "mcp__fx__write_note" and "text: b" in waiting["preview"]
        echoed = terminal.wait_for("tool", phase="result", name="mcp__fx__echo")
        assert echoed["ok"] and "echo: a" in echoed["output"]  # read-only: ran without asking
        assert terminal.approve(waiting["call_id"], True)
        thread.join(15)
        noted = terminal.wait_for("tool", phase="result", name="mcp__fx__write_note")
        assert noted["ok"] and noted["output"] == "noted: b"
        offered = {t["function"]["name"]: t for t in fake_llm.chat_requests[0].body["tools"]}
        assert offered["mcp__fx__echo"]["function"]["parameters"]["required"] == ["text"]

        terminal.approval = "read-only"
        fake_llm.script(
            Reply(tool_calls=[Call("mcp__fx__write_note", {"text": "c"})]), Reply(content="ok")
        )
        assert terminal.handle_task("again") == "complete"
        names = {t["function"]["name"] for t in fake_llm.chat_requests[2].body["tools"]}
        assert "mcp__fx__echo" in names and "mcp__fx__write_note" not in names
        refused = terminal.named("tool")[-1]
        assert refused["ok"] is False and "read-only mode" in refused["output"]
    finally:
        terminal.services.close()
    assert running(marker) == []


def test_always_allow_and_allowed_tools_shape_what_is_offered(tmp_path):
    manager = manager_for(
        tmp_path,
        {
            "fx": stdio_entry(
                "mcp-allow", alwaysAllow=["write_*"], allowed_tools=["echo", "write_note"]
            )
        },
    )
    manager.start()
    try:
        tools = wait_started(manager).tools()
        assert set(tools) == {"mcp__fx__echo", "mcp__fx__write_note"}
        gate = ApprovalGate()
        assert not gate.needs_approval("ask", tools["mcp__fx__write_note"], None)
        assert not tools["mcp__fx__write_note"].read_only
    finally:
        manager.close()


def test_slash_mcp_and_the_status_payload_list_the_servers(make_web, tmp_path):
    marker = f"mcp-{uuid.uuid4().hex[:8]}"
    write_config(
        tmp_path / "data" / "mcp.json",
        {"fx": stdio_entry(marker), "off": {"command": "x", "disabled": True}},
    )
    web = make_web()
    try:
        status = web.connect().call("get_status", {})["mcp"]
        assert [s["name"] for s in status["servers"]] == ["fx", "off"]
        assert status["servers"][1]["state"] == "disabled"
        wait_started(web.state.services.mcp)
        servers = web.connect().call("get_status", {})["mcp"]["servers"]
        assert servers[0]["state"] == "connected"
        echo = next(t for t in servers[0]["tools"] if t["tool"] == "echo")
        assert echo == {
            "name": "mcp__fx__echo",
            "tool": "echo",
            "read_only": True,
            "asks": False,
            "description": "[MCP server fx] Say the text back.",
        }
        out = io.StringIO()
        terminal = CliTerminal(web.state.services, out=out, err=out, stdin=io.StringIO())
        run_command(terminal, "/mcp")
        listed = out.getvalue()
        assert "fx" in listed and "connected" in listed
        assert "mcp__fx__echo  (read-only)" in listed
        assert "mcp__fx__write_note  (asks in ask mode)" in listed
        assert "off" in listed and "disabled" in listed
        run_command(terminal, "/mcp restart nope")
        assert "no MCP server 'nope'" in out.getvalue()
        run_command(terminal, "/mcp restart fx")
        assert "restarting fx" in out.getvalue()
    finally:
        web.state.services.close()
    assert running(marker) == []


def test_no_servers_configured_costs_nothing(tmp_path):
    settings = Settings(workspace=tmp_path / "ws", data_dir=tmp_path / "data")
    manager = build_manager(settings)
    assert manager.servers == {} and manager.tools() == {}
    manager.close()
    services = build_services(settings)
    assert services.mcp is None  # no file: the MCP code is not even loaded
    code = (
        "import sys; from core.services import build_services; from utils.settings import "
        f"Settings; build_services(Settings(workspace={str(tmp_path / 'ws')!r}, "
        f"data_dir={str(tmp_path / 'data')!r})); "
        "print(sorted(m for m in sys.modules if 'mcp' in m))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parent.parent,
        check=True,
    )
    assert loaded.stdout.strip() == "[]", loaded.stdout + loaded.stderr
    out = io.StringIO()
    run_command(CliTerminal(services, out=out, err=out, stdin=io.StringIO()), "/mcp")
    assert "no MCP servers" in out.getvalue()


@pytest.mark.e2e
def test_the_eventlet_server_calls_mcp_tools_without_blocking_its_loop(fake_llm, tmp_path):
    marker = f"mcp-{uuid.uuid4().hex[:8]}"
    write_config(tmp_path / "data" / "mcp.json", {"fx": stdio_entry(marker)})
    fake_llm.script(
        Reply(
            tool_calls=[
                Call("mcp__fx__slow", {"seconds": 1.5}),
                Call("mcp__fx__echo", {"text": "green"}),
            ]
        ),
        Reply(content="done"),
    )
    process = ServerProcess(
        tmp_path / "ws",
        tmp_path / "data",
        base_url=fake_llm.base_url,
        api_key=fake_llm.api_key,
        async_mode="eventlet",
    ).start()
    try:
        client = EventClient(process.url).connect()
        wait_until(
            lambda: client.call("get_status")["mcp"]["servers"][0]["state"] != "starting",
            30,
            "the MCP server to start",
        )
        cid = client.start("use the fixture")
        client.wait_until(
            lambda events: any(
                e.name == "tool"
                and e.payload.get("phase") == "end"
                and e.payload.get("name") == "mcp__fx__slow"
                for e in events
            ),
            20,
            "the slow call",
        )
        started = time.monotonic()
        assert client.call("get_status")["mcp"]["servers"][0]["state"] == "connected"
        assert time.monotonic() - started < 0.5  # the loop answers while the call runs
        results = [
            e.payload
            for e in client.wait_done(cid)
            if e.name == "tool" and e.payload.get("phase") == "result"
        ]
        assert [r["ok"] for r in results] == [True, True], results
        assert results[0]["output"] == "slow done" and "echo: green" in results[1]["output"]
        client.disconnect()
    finally:
        assert process.stop() == 0
    wait_until(lambda: running(marker) == [], 10, "the MCP server to stop with the web server")
