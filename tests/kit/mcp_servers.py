"""The MCP part of the test kit: a configuration of stdio servers running our fixture server
(tests/kit/mcp_fixture_server.py), a manager on it, and the processes a marker names."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from modules.mcp.client import McpManager
from modules.mcp.config import load_config
from tests.kit.processes import live_command_lines
from tests.kit.waits import wait_until

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
    return McpManager(config, workspace=tmp_path / "ws", data_dir=tmp_path / "data")


def wait_started(manager: McpManager) -> McpManager:
    """Wait until no server is still starting (a loaded machine can take longer than the
    first listing waits)."""
    wait_until(
        lambda: all(s.state != "starting" for s in manager.servers.values()),
        30,
        "the MCP servers to start",
    )
    return manager


def running(marker: str) -> list[int]:
    return [pid for pid, argv in live_command_lines().items() if marker in argv]
