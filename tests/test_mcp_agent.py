"""MCP tools in use: approvals in the agent loop, `/mcp`, the page's status, the eventlet server."""

from __future__ import annotations

import io
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from cli.session import run_command
from cli.terminal import CliTerminal
from core.approval import ApprovalGate
from core.services import build_services
from modules.mcp.client import build_manager
from tests.fake_llm import Call, Reply
from tests.kit.clients import EventClient
from tests.kit.mcp_servers import manager_for, running, stdio_entry, wait_started, write_config
from tests.kit.server import ServerProcess
from tests.kit.settings import make_settings
from tests.kit.terminal import ask, make_terminal, run_in_thread
from tests.kit.waits import wait_until


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
        assert ask(terminal, "again") == "complete"
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
    settings = make_settings(None, tmp_path)
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
    (tmp_path / "ws").mkdir(exist_ok=True)  # a --workspace that does not exist is refused
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
