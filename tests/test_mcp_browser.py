"""The page's MCP panel in a real headless Chromium against the real server."""

from __future__ import annotations

import json
import sys
import uuid
from pathlib import Path

import pytest

from tests.browser_helpers import ARTIFACTS
from tests.fake_llm import FakeLLM
from tests.helpers import live_command_lines
from tests.kit import wait_until
from tests.mcp_fixture_server import TOOLS as FIXTURE_TOOLS
from tests.web_helpers import TOKEN, ServerProcess

pytestmark = [pytest.mark.browser, pytest.mark.e2e]
FIXTURE = Path(__file__).resolve().parent / "mcp_fixture_server.py"


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
        connected.wait_for()  # the panel polls while the server starts
        connected.locator("summary").click()
        tools = connected.locator(".mcp-tool")
        assert tools.count() == len(FIXTURE_TOOLS)
        assert "read-only" in connected.locator(".mcp-tool", has_text="echo").inner_text()
        assert "asks" in connected.locator(".mcp-tool", has_text="write_note").inner_text()
        failed = panel.locator('[data-name="missing"][data-state="failed"]')
        failed.locator("summary").click()
        assert "command not found" in failed.inner_text()
        assert panel.locator('[data-name="off"][data-state="disabled"]').count() == 1
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "mcp-panel.png"))
        assert page.console_errors == []
    wait_until(
        lambda: not any(marker in argv for argv in live_command_lines().values()),
        10,
        "the MCP server to stop with the web server",
    )
