"""The configured MCP servers, their tools offered to the registry as `mcp__SERVER__TOOL`.

Servers connect in the background at start (modules/mcp/connection.py holds one server's
connection). The SDK, imported only when a server is configured, runs on one asyncio loop
thread that every connection shares.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from modules.mcp.config import McpConfig, load_config
from modules.mcp.connection import CLOSE_TIMEOUT, McpServer
from modules.mcp.launch import ServerFolders
from modules.tools.registry import Tool
from utils.async_loop import LoopThread, Pending, wait_real_event
from utils.errors import Invalid, NotFound
from utils.settings import Settings

FIRST_LISTING_WAIT = 10.0  # the first tool listing waits this long after start for slow servers


class McpManager:
    """Every configured server; the registry's source of MCP tools."""

    def __init__(
        self,
        config: McpConfig,
        *,
        workspace: Path,
        data_dir: Path,
        use_proxy: bool = False,
        user_file: Path | None = None,
    ) -> None:
        self.workspace, self.logs, self.use_proxy = workspace, data_dir / "logs", use_proxy
        self.folders = ServerFolders(data_dir)
        self.user_file = user_file  # the file the page may change (modules/mcp/user_file.py)
        self.problems = config.problems
        self.servers = {name: McpServer(server, self) for name, server in config.servers.items()}
        self._applying = threading.Lock()
        self._retiring: list[Pending[None]] = []  # servers removed or replaced, being stopped
        self._loop: LoopThread | None = None
        self._started = 0.0
        self._settled = threading.Event()

    @property
    def loop(self) -> LoopThread:
        if self._loop is None:
            self._loop = LoopThread("mcp-loop")
        return self._loop

    def start(self) -> None:
        """Connect every enabled server in the background; returns at once."""
        self._started = time.monotonic()
        for server in self.servers.values():
            if server.state != "disabled":
                server.open_soon()

    def tools(self) -> Mapping[str, Tool]:
        """The tools of every server that connected (a failed one keeps its last list, so a
        call restarts it). The first listing waits a little for servers still starting."""
        starting = [s for s in self.servers.values() if s.state == "starting"]
        left = self._started + FIRST_LISTING_WAIT - time.monotonic()
        if starting and left > 0 and not self._settled.is_set():
            deadline = time.monotonic() + left
            while any(s.state == "starting" for s in starting) and time.monotonic() < deadline:
                wait_real_event(self._settled, 0.05)
        self._settled.set()
        return {name: tool for s in self.servers.values() for name, tool in s.tools.items()}

    def status(self) -> dict[str, Any]:
        editable = str(self.user_file) if self.user_file else None
        return {
            "servers": [
                s.status() | {"editable": s.config.source == editable}
                for s in self.servers.values()
            ],
            "problems": list(self.problems),
            "config": editable,
        }

    def apply(self, config: McpConfig) -> None:
        """Take a configuration read again: a server added is started, one removed is stopped,
        one whose entry changed is replaced (started again unless now disabled); the others
        keep their connection."""
        with self._applying:
            old = self.servers
            new = {
                name: old[name]
                if name in old and old[name].config == server
                else McpServer(server, self)
                for name, server in config.servers.items()
            }
            self.servers, self.problems = new, config.problems
        for name, server in old.items():
            if new.get(name) is not server:
                self._retiring.append(self.loop.submit(server.retire()))
        for name, server in new.items():
            if old.get(name) is not server and server.state != "disabled":
                server.open_soon()

    def restart(self, name: str) -> None:
        """Reconnect one server now (NotFound for an unknown one, Invalid for one turned off)."""
        server = self.servers.get(name)
        if server is None:
            raise NotFound(f"no MCP server named {name}")
        if server.state == "disabled":
            raise Invalid(f"{name} is disabled: {server.error}")
        server.open_soon()

    def close(self) -> None:
        """Close every connection (stdio servers are stopped) and the loop thread."""
        if self._loop is None:
            return
        closing = [self._loop.submit(s.disconnect()) for s in self.servers.values()]
        for pending in [*self._retiring, *closing]:
            with contextlib.suppress(Exception):
                pending.wait(CLOSE_TIMEOUT + 1)
        self._loop.stop()
        self._loop = None


def build_manager(settings: Settings) -> McpManager:
    """The servers of the user's file and of the workspace's; none is started yet."""
    user_file, _ = settings.mcp_files()
    return McpManager(
        read_config(settings),
        workspace=settings.workspace,
        data_dir=settings.data_dir,
        use_proxy=settings.use_proxy,
        user_file=user_file,
    )


def read_config(settings: Settings) -> McpConfig:
    user_file, workspace_file = settings.mcp_files()
    return load_config(user_file, workspace_file, trust_workspace=settings.mcp_trust_workspace)
