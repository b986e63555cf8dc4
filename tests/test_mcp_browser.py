"""The page's MCP panel in a real headless Chromium against the real server."""

from __future__ import annotations

import json
import sys
import uuid

import pytest

from history.store import ConversationStore
from tests.fake_llm import FakeLLM
from tests.kit.browser import ARTIFACTS, patience
from tests.kit.mcp_fixture_server import TOOLS as FIXTURE_TOOLS
from tests.kit.mcp_servers import FIXTURE, running, stdio_entry, write_config
from tests.kit.processes import live_command_lines
from tests.kit.server import ServerProcess
from tests.kit.settings import TOKEN
from tests.kit.waits import wait_until

SERVER_START = patience(45)  # a stdio server is a Python process importing the MCP SDK

pytestmark = [pytest.mark.browser, pytest.mark.e2e]


def test_the_panel_lists_each_server_with_its_state_and_tools(tmp_path, page):
    marker = f"mcp-{uuid.uuid4().hex[:8]}"
    data = tmp_path / "data"
    data.mkdir()
    (data / "mcp.json").write_text(
        json.dumps(
            {
                "mcpServers": {
                    "fixture": {
                        "command": sys.executable,
                        "args": [str(FIXTURE), "--marker", marker],
                    },
                    "missing": {"command": "no-such-mcp-server-command"},
                    "off": {"command": "anything", "disabled": True},
                }
            }
        )
    )
    (tmp_path / "ws").mkdir()
    with (
        FakeLLM("deepseek") as fake,
        ServerProcess(
            tmp_path / "ws", data, base_url=fake.base_url, api_key=fake.api_key
        ) as server,
    ):
        page.goto(f"{server.url}/?token={TOKEN}")
        panel = page.locator("[data-testid=mcp-panel]")
        panel.wait_for()
        connected = panel.locator('[data-name="fixture"][data-state="connected"]')
        connected.wait_for(timeout=SERVER_START)  # the panel polls while the server starts
        connected.locator("summary").click()
        tools = connected.locator(".mcp-tool")
        assert tools.count() == len(FIXTURE_TOOLS)
        assert "read-only" in connected.locator(".mcp-tool", has_text="echo").inner_text()
        assert "asks" in connected.locator(".mcp-tool", has_text="write_note").inner_text()
        failed = panel.locator('[data-name="missing"][data-state="failed"]')
        failed.locator("summary").click()
        assert "command not found" in failed.inner_text()
        off = panel.locator('[data-name="off"][data-kind="off"]')
        off.locator("summary").click()
        assert "Turned off in mcp.json" in off.locator(".mcp-note").inner_text()
        assert not off.locator(".mcp-error").is_visible(), "a server turned off is not an error"
        assert off.locator(".mcp-state").inner_text() == "off"
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "mcp-panel.png"))
        assert page.console_errors == []
    wait_until(
        lambda: not any(marker in argv for argv in live_command_lines().values()),
        10,
        "the MCP server to stop with the web server",
    )


# The sidebar's parts above the MCP panel, and their heights.
HEIGHTS = """() => Object.fromEntries(
  ["#new-conversation", "#conversation-search", "#conversation-list", "#file-tree"].map(
    (s) => [s, Math.round(document.querySelector(s).getBoundingClientRect().height)]))"""


def test_servers_are_added_restarted_turned_off_and_on_and_removed_from_the_panel(tmp_path, page):
    marker = f"mcp-{uuid.uuid4().hex[:8]}"
    (tmp_path / "ws").mkdir()
    with (
        FakeLLM("deepseek") as fake,
        ServerProcess.in_folder(tmp_path, fake) as server,
    ):
        page.goto(f"{server.url}/?token={TOKEN}")
        panel = page.locator("[data-testid=mcp-panel]")
        panel.locator(".mcp-empty").wait_for()  # no file yet: the panel is there to add one
        page.click("[data-testid=mcp-add]")
        dialog = page.locator("[data-testid=mcp-add-dialog]")
        assert str(tmp_path / "data" / "mcp.json") in dialog.inner_text()
        dialog.locator("[data-testid=mcp-add-name]").fill("fx")
        dialog.locator("[data-testid=mcp-add-command]").fill("no-such-mcp-command --x")
        dialog.locator("[data-testid=mcp-add-submit]").click()
        error = dialog.locator("[data-testid=mcp-add-error]")
        error.wait_for()
        assert "command not found: no-such-mcp-command" in error.inner_text()
        line = f'"{sys.executable}" {FIXTURE} --marker "{marker}"'
        dialog.locator("[data-testid=mcp-add-command]").fill(line)
        dialog.locator("[data-testid=mcp-add-env]").fill("FIXTURE_KEY=from the page")
        dialog.locator("[data-testid=mcp-add-submit]").click()
        dialog.wait_for(state="detached")
        item = panel.locator('[data-name="fx"]')
        panel.locator('[data-name="fx"][data-state="connected"]').wait_for(timeout=SERVER_START)
        saved = json.loads((tmp_path / "data" / "mcp.json").read_text())["mcpServers"]["fx"]
        assert saved == {
            "command": sys.executable,
            "args": [str(FIXTURE), "--marker", marker],
            "env": {"FIXTURE_KEY": "from the page"},
        }
        [first] = running(marker)

        item.locator("[data-testid=mcp-restart]").click()
        wait_until(lambda: running(marker) not in ([], [first]), 30, "a new server process")
        panel.locator('[data-name="fx"][data-state="connected"]').wait_for(timeout=SERVER_START)

        item.locator("[data-testid=mcp-disable]").click()
        panel.locator('[data-name="fx"][data-kind="off"]').wait_for()
        assert "Turned off" in item.locator(".mcp-note").inner_text()
        wait_until(lambda: running(marker) == [], 15, "the server to stop when turned off")
        item.locator("[data-testid=mcp-enable]").click()
        panel.locator('[data-name="fx"][data-state="connected"]').wait_for(timeout=SERVER_START)

        item.locator("[data-testid=mcp-remove]").click()
        page.locator("[data-testid=mcp-remove-dialog] button.btn-danger").click()
        panel.locator(".mcp-empty").wait_for()
        wait_until(lambda: running(marker) == [], 15, "the removed server to stop")
        assert page.console_errors == []


def test_the_panel_never_squashes_the_search_box_or_the_buttons(tmp_path, page):
    data = tmp_path / "data"
    write_config(
        data / "mcp.json",
        {f"server-{n}": {"command": "anything", "disabled": True} for n in range(12)}
        | {"fixture": stdio_entry("squash")},
    )
    store = ConversationStore(data)
    for n in range(25):  # a long list: the section shrinks, the search box above it must not
        store.create(title=f"Conversation {n}")
    (tmp_path / "ws").mkdir()
    with (
        FakeLLM("deepseek") as fake,
        ServerProcess(
            tmp_path / "ws", data, base_url=fake.base_url, api_key=fake.api_key
        ) as server,
    ):
        page.goto(f"{server.url}/?token={TOKEN}")
        page.locator('[data-name="fixture"][data-state="connected"]').wait_for(timeout=SERVER_START)
        roomy = page.evaluate(HEIGHTS)
        page.set_viewport_size({"width": 1366, "height": 640})
        page.locator('[data-name="fixture"] summary').click()
        for name in ("server-0", "server-1"):
            page.locator(f'[data-name="{name}"] summary').click()
        tight = page.evaluate(HEIGHTS)
        for part in ("#new-conversation", "#conversation-search"):
            assert tight[part] == roomy[part], (part, roomy, tight)
        assert tight["#conversation-list"] >= 60 and tight["#file-tree"] >= 40, tight
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "mcp-panel-tight.png"))
