"""The MCP panel's operations on a real server process with our fixture MCP server: a server is
added to the user's file (private, as typed), started and offered to the model, turned off and
on, restarted and removed; what the page may not change is refused and left as it was."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.fake_llm import Call, FakeLLM, Reply
from tests.kit.clients import EventClient, connected
from tests.kit.mcp_servers import FIXTURE, running, stdio_entry
from tests.kit.server import ServerProcess, free_port, listening, serving
from tests.kit.waits import wait_until

# The first two tests share the module's server (no MCP file at its start); each removes the
# server it adds.
pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("clean_fake")]


def servers(client: EventClient) -> dict[str, dict[str, Any]]:
    status = client.call("get_status", {})["mcp"]
    return {server["name"]: server for server in status["servers"]}


def wait_state(client: EventClient, name: str, state: str) -> dict[str, Any]:
    found: dict[str, Any] = {}

    def reached() -> bool:
        found.update(servers(client).get(name, {}))
        return found.get("state") == state

    wait_until(reached, 30, f"MCP server {name} to be {state} (last seen: {found})")
    return found


def test_a_server_added_from_the_page_runs_is_offered_and_is_turned_off_on_and_removed(
    server: ServerProcess, client: EventClient, fake: FakeLLM
) -> None:
    marker = f"mcp-{uuid.uuid4().hex[:8]}"
    user_file = server.data_dir / "mcp.json"
    status = client.call("get_status", {})["mcp"]
    # no server (no file at start): the panel still says where a server it adds is written
    assert status == {"servers": [], "problems": [], "config": str(user_file)}
    entry = stdio_entry(marker, env={"FIXTURE_KEY": "typed ${NOT_EXPANDED:-x}"})
    ack = client.call("mcp_add_server", {"name": "fx", **entry})
    assert ack["ok"], ack
    assert ack["mcp"]["config"] == str(user_file)
    assert stat.S_IMODE(user_file.stat().st_mode) == 0o600
    assert json.loads(user_file.read_text()) == {"mcpServers": {"fx": entry}}
    added = wait_state(client, "fx", "connected")
    assert added["editable"] is True and added["disabled"] is False
    assert len(running(marker)) == 1

    fake.script(
        Reply(tool_calls=[Call("mcp__fx__echo", {"text": "from the page"})]),
        Reply(content="Echoed."),
    )
    client.start("echo it")
    done = client.wait_for("done", timeout=30)
    assert done["reason"] == "complete"
    result = next(e for e in client.named("tool") if e["phase"] == "result")
    assert "echo: from the page" in result["output"]

    ack = client.call("mcp_set_enabled", {"name": "fx", "enabled": False})
    assert ack["ok"], ack
    off = servers(client)["fx"]
    assert off["state"] == "disabled" and off["disabled"] is True
    assert json.loads(user_file.read_text())["mcpServers"]["fx"]["disabled"] is True
    wait_until(lambda: running(marker) == [], 15, "the turned-off server to stop")

    assert client.call("mcp_set_enabled", {"name": "fx", "enabled": True})["ok"]
    assert "disabled" not in json.loads(user_file.read_text())["mcpServers"]["fx"]
    wait_state(client, "fx", "connected")
    [first] = running(marker)
    assert client.call("mcp_restart_server", {"name": "fx"})["ok"]
    wait_until(lambda: running(marker) not in ([], [first]), 30, "a new server process")
    wait_state(client, "fx", "connected")

    assert client.call("mcp_remove_server", {"name": "fx"})["ok"]
    assert "fx" not in servers(client)
    assert json.loads(user_file.read_text()) == {"mcpServers": {}}
    wait_until(lambda: running(marker) == [], 15, "the removed server to stop")


def test_a_url_server_is_added_with_its_headers(server: ServerProcess, client: EventClient) -> None:
    port = free_port()
    fixture = subprocess.Popen(
        [sys.executable, str(FIXTURE), "--http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert listening(port, 30, alive=lambda: fixture.poll() is None), "the fixture's port"
        url = f"http://127.0.0.1:{port}/mcp"
        payload = {"name": "remote", "url": url, "headers": {"X-Test": "1"}}
        assert client.call("mcp_add_server", payload)["ok"]
        listed = json.loads((server.data_dir / "mcp.json").read_text())
        assert listed["mcpServers"]["remote"] == {
            "type": "http",
            "url": url,
            "headers": {"X-Test": "1"},
        }
        remote = wait_state(client, "remote", "connected")
        assert remote["target"] == url and "echo" in {t["tool"] for t in remote["tools"]}
    finally:
        client.call("mcp_remove_server", {"name": "remote"})  # the shared server as it was
        fixture.terminate()
        fixture.wait(5)


def test_what_the_page_may_not_change_is_refused_and_left_as_it_was(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    theirs_file = json.dumps({"mcpServers": {"theirs": {"command": "x"}}})
    with serving(tmp_path, fake_llm, {}, {".mcp.json": theirs_file}) as server:
        user_file = tmp_path / "data" / "mcp.json"
        with connected(server.url) as client:
            theirs = servers(client)["theirs"]
            assert theirs["state"] == "disabled" and theirs["editable"] is False
            assert "AGENT_MCP_TRUST_WORKSPACE" in theirs["error"]
            for event, payload in (
                ("mcp_set_enabled", {"name": "theirs", "enabled": True}),
                ("mcp_remove_server", {"name": "theirs"}),
            ):
                ack = client.call(event, payload)
                assert ack["error"]["code"] == "invalid", ack
                assert ".mcp.json" in ack["error"]["message"]
            assert not user_file.exists()  # nothing written to start their command

            refusals: dict[str, dict[str, Any]] = {
                "both": {"name": "a", "command": sys.executable, "url": "http://127.0.0.1:1/"},
                "neither": {"name": "a"},
                "bad name": {"name": "../a", "command": sys.executable},
                "bad env": {"name": "a", "command": sys.executable, "env": {"A=B": "c"}},
                "headers": {"name": "a", "command": sys.executable, "headers": {"X": "1"}},
            }
            for why, payload in refusals.items():
                assert client.call("mcp_add_server", payload)["error"]["code"] == "bad_request", why
            missing = client.call("mcp_add_server", {"name": "a", "command": "no-such-mcp-cmd"})
            assert missing["error"]["code"] == "invalid"
            assert "command not found: no-such-mcp-cmd" in missing["error"]["message"]
            taken = client.call("mcp_add_server", {"name": "theirs", "command": sys.executable})
            assert taken["error"]["code"] == "conflict"
            assert not user_file.exists()

            user_file.write_text('{"mcpServers": {')  # the user's own file, half typed
            broken = client.call("mcp_add_server", {"name": "a", "command": sys.executable})
            assert broken["error"]["code"] == "invalid" and "fix it by hand" in str(broken)
            assert user_file.read_text() == '{"mcpServers": {'

            assert client.call("mcp_restart_server", {"name": "nope"})["error"]["code"] == (
                "not_found"
            )
            restart = client.call("mcp_restart_server", {"name": "theirs"})
            assert restart["error"]["code"] == "invalid"


def test_a_command_is_checked_where_its_start_would_find_it(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    """The check of a server the page adds and its start agree: a command found only on a
    PATH entry in the workspace, named by its path there, or relative, is refused
    `invalid` (the first was accepted, then never started); one on the servers' PATH is added."""
    planted = "planted-mcp-tool"
    tool = tmp_path / "ws" / "bin" / planted
    path = f"{tool.parent}{os.pathsep}{os.environ.get('PATH', os.defpath)}"
    files = {f"bin/{planted}": "#!/bin/sh\nexit 1\n", "here.sh": "#!/bin/sh\nexit 1\n"}
    with (
        serving(tmp_path, fake_llm, {"PATH": path}, files) as server,
        connected(server.url) as client,
    ):
        for program in (tool, tmp_path / "ws" / "here.sh"):
            program.chmod(0o755)
        on_path = client.call("mcp_add_server", {"name": "a", "command": planted})
        assert on_path["error"]["code"] == "invalid", on_path
        assert f"command not found: {planted}" in on_path["error"]["message"]
        assert str(tool.parent) not in on_path["error"]["message"]  # not on the servers' PATH
        named = client.call("mcp_add_server", {"name": "b", "command": str(tool)})
        assert named["error"]["code"] == "invalid" and "lies in the workspace" in str(named)
        relative = client.call("mcp_add_server", {"name": "c", "command": "./here.sh"})
        assert relative["error"]["code"] == "invalid", relative
        assert not (tmp_path / "data" / "mcp.json").exists()

        python = Path(sys.executable).name  # a name on the servers' PATH, as users type it
        added = client.call("mcp_add_server", {"name": "d", "command": python})
        assert added["ok"], added
        assert json.loads((tmp_path / "data" / "mcp.json").read_text())["mcpServers"]["d"] == {
            "command": python
        }
