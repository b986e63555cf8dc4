"""Connections to the configured MCP servers, their tools offered as `mcp__SERVER__TOOL`.

Servers connect in the background at start; a call is bounded by the server's `timeout` and
cancelled with the task; a server that died or stopped answering is marked failed and started
again on its next use. The SDK (imported only when a server is configured) runs on one
asyncio loop thread; each connection is held open by one task there, which enters and leaves
the SDK's context (anyio requires both in the same task).
"""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
import json
import logging
import os
import re
import shutil
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from modules.context import ToolContext
from modules.mcp_config import McpConfig, ServerConfig, ServerEntry, load_config, tool_name
from modules.registry import JsonArguments, Tool
from modules.results import ToolError, ToolOutput
from utils.async_loop import LoopThread, Pending, wait_real_event
from utils.cancel import CancelToken, TaskCancelled
from utils.settings import Settings

if TYPE_CHECKING:
    from mcp import Client

log = logging.getLogger(__name__)

CONNECT_TIMEOUT = 30.0
FIRST_LISTING_WAIT = 10.0  # the first tool listing waits this long after start for slow servers
CLOSE_TIMEOUT = 7.0  # the SDK's stdio shutdown: close stdin, 2 s, SIGTERM, 2 s, SIGKILL
STDERR_TAIL_CHARS = 400
DESCRIPTION_LIMIT = 2_000
MAX_TOOL_PAGES = 50
CLIENT_NAME = "workspace-agent"

State = Literal["disabled", "starting", "connected", "failed"]

# Runs a stdio server with PR_SET_PDEATHSIG: the kernel kills it if this process dies without
# closing it (a crash, SIGKILL). The SDK spawns children itself and takes no preexec hook.
_ORPHAN_GUARD = (
    "import ctypes,os,signal,sys\n"
    "ctypes.CDLL(None).prctl(1,signal.SIGKILL)\n"
    "os.getppid()==int(sys.argv[1]) or os._exit(1)\n"
    "os.execvp(sys.argv[2],sys.argv[2:])\n"
)


class McpServer:
    """One configured server: its state, its tools, and the connection while it is open."""

    def __init__(self, config: ServerConfig, manager: McpManager) -> None:
        self.config = config
        self.name = config.name
        self.state: State = "starting" if config.enabled else "disabled"
        self.error: str | None = config.problem or (
            "disabled in its configuration" if config.entry and config.entry.disabled else None
        )
        # The tools by namespaced name, and each one's name on the server: replaced together.
        self._listing: tuple[dict[str, Tool], dict[str, str]] = ({}, {})
        self._manager = manager
        self._client: Client | None = None
        self._stop: asyncio.Event | None = None
        self._holder: asyncio.Task[None] | None = None
        self._opening: Pending[None] | None = None
        self._lock = threading.Lock()
        self._log_start = 0

    @property
    def tools(self) -> dict[str, Tool]:
        return self._listing[0]

    @property
    def entry(self) -> ServerEntry:
        assert self.config.entry is not None
        return self.config.entry

    # --- what callers' threads use ------------------------------------------------------

    def open_soon(self) -> Pending[None]:
        """Start connecting unless a connection is already being made; never waits."""
        with self._lock:
            if self._opening is None or self._opening.done:
                self.state, self.error = "starting", None
                self._opening = self._manager.loop.submit(self._open())
            return self._opening

    def call(self, remote: str, arguments: dict[str, Any], cancel: CancelToken) -> ToolOutput:
        """Call one of the server's tools; ToolError says why it failed."""
        client = self._client
        if client is None or self.state != "connected":
            with contextlib.suppress(TimeoutError):
                self.open_soon().wait(CONNECT_TIMEOUT + CLOSE_TIMEOUT, cancel)
            client = self._client
            if client is None:
                raise ToolError(f"MCP server {self.name} is not available: {self.error}")
        timeout = self.entry.timeout
        pending = self._manager.loop.submit(client.call_tool(remote, arguments))
        try:
            result = pending.wait(timeout, cancel)
        except TaskCancelled:
            raise
        except TimeoutError:
            self._lost(client, f"{remote} did not answer within {timeout:g} s")
            raise ToolError(
                f"MCP server {self.name} did not answer {remote} within {timeout:g} s; "
                "it is restarted on its next use."
            ) from None
        except Exception as exc:
            self._refused_or_lost(client, remote, exc)
        return _output(result)

    def _refused_or_lost(self, client: Client, remote: str, exc: Exception) -> None:
        from mcp import MCPError
        from mcp_types import CONNECTION_CLOSED
        from pydantic import ValidationError

        if isinstance(exc, MCPError) and exc.code != CONNECTION_CLOSED:
            raise ToolError(f"MCP server {self.name} refused {remote}: {exc.message}") from None
        if isinstance(exc, ValidationError):
            raise ToolError(
                f"MCP server {self.name} answered {remote} with a malformed "
                f"result: {exc.error_count()} problems"
            ) from None
        reason = f"the connection broke ({_describe(exc)}){self._stderr_tail()}"
        self._lost(client, reason)
        raise ToolError(
            f"MCP server {self.name} stopped while running {remote}: {reason}. "
            "It is restarted on its next use."
        ) from None

    def _lost(self, client: Client, reason: str) -> None:
        """Mark the server failed and close its connection, unless a newer one replaced it."""
        if self._client is not client:
            return
        self.state, self.error = "failed", reason
        log.warning("MCP server lost", extra={"fields": {"server": self.name, "error": reason}})
        self._manager.loop.submit(self._disconnect())

    def status(self) -> dict[str, Any]:
        entry, (tools, remote) = self.config.entry, self._listing
        return {
            "name": self.name,
            "source": self.config.source,
            "transport": entry.transport if entry else None,
            "target": _target(entry) if entry else None,
            "state": self.state,
            "error": self.error,
            "tools": [
                {
                    "name": name,
                    "tool": remote[name],
                    "read_only": tool.read_only,
                    "asks": tool.asks == "always",
                    "description": tool.description,
                }
                for name, tool in tools.items()
            ],
        }

    # --- on the loop thread -------------------------------------------------------------

    async def _open(self) -> None:
        await self._disconnect()
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[tuple[Client, list[Any]]] = loop.create_future()
        stop = asyncio.Event()
        holder = loop.create_task(self._hold(ready, stop))
        try:
            client, listed = await asyncio.wait_for(asyncio.shield(ready), CONNECT_TIMEOUT)
        except BaseException as exc:
            holder.cancel()
            await asyncio.wait([holder], timeout=CLOSE_TIMEOUT)
            if isinstance(exc, asyncio.CancelledError):
                raise
            self.state, self.error = "failed", _failure(exc) + self._stderr_tail()
            log.warning(
                "MCP server failed to start",
                extra={"fields": {"server": self.name, "error": self.error}},
            )
            return
        self._client, self._stop, self._holder = client, stop, holder
        self._listing = self._tools(listed)
        self.state, self.error = "connected", None
        log.info(
            "MCP server connected",
            extra={"fields": {"server": self.name, "tools": len(self.tools)}},
        )

    async def _hold(self, ready: asyncio.Future[Any], stop: asyncio.Event) -> None:
        """Open the connection, hand it over, keep it until `stop`, then close it."""
        try:
            async with contextlib.AsyncExitStack() as stack:
                client = await self._connect(stack)
                ready.set_result((client, await _list_tools(client)))
                await stop.wait()
        except Exception as exc:
            if not ready.done():
                ready.set_exception(exc)
            else:
                log.info(
                    "MCP connection closed with an error",
                    extra={"fields": {"server": self.name, "error": _describe(exc)}},
                )
        except asyncio.CancelledError:
            if not ready.done():
                ready.cancel()
            raise

    async def _connect(self, stack: contextlib.AsyncExitStack) -> Client:
        from mcp import Client, Implementation

        entry = self.entry
        if entry.transport == "stdio":
            transport = self._stdio(stack)
        else:
            import httpx2
            from mcp.client.sse import sse_client
            from mcp.client.streamable_http import streamable_http_client

            def http_client(
                headers: dict[str, str] | None = None, timeout: Any = None, auth: Any = None
            ) -> httpx2.AsyncClient:
                return httpx2.AsyncClient(
                    headers={**entry.headers, **(headers or {})},
                    auth=auth,
                    timeout=timeout or httpx2.Timeout(30.0, read=300.0),
                    trust_env=self._manager.use_proxy,
                )

            assert entry.url is not None
            if entry.transport == "sse":
                transport = sse_client(entry.url, httpx_client_factory=http_client)
            else:
                client = await stack.enter_async_context(http_client())
                transport = streamable_http_client(entry.url, http_client=client)
        info = Implementation(name=CLIENT_NAME, version="1")
        return await stack.enter_async_context(Client(transport, client_info=info))

    def _stdio(self, stack: contextlib.AsyncExitStack) -> Any:
        from mcp import StdioServerParameters
        from mcp.client.stdio import get_default_environment, stdio_client

        entry = self.entry
        env = get_default_environment() | entry.env
        if shutil.which(entry.command or "", path=env.get("PATH")) is None:
            raise FileNotFoundError(f"command not found: {entry.command}")
        command, args = entry.command or "", list(entry.args)
        if sys.platform.startswith("linux"):
            command, args = (
                sys.executable,
                ["-I", "-S", "-c", _ORPHAN_GUARD, str(os.getpid()), command, *args],
            )
        cwd = Path(entry.cwd).expanduser() if entry.cwd else self._manager.workspace
        if not cwd.is_absolute():
            cwd = Path(self.config.source).parent / cwd
        errlog = stack.enter_context(self._log_path().open("a", encoding="utf-8"))
        self._log_start = errlog.tell()
        params = StdioServerParameters(command=command, args=args, env=env, cwd=cwd)
        return stdio_client(params, errlog=errlog)

    async def _disconnect(self) -> None:
        stop, holder = self._stop, self._holder
        self._client = self._stop = self._holder = None
        if stop is None or holder is None:
            return
        stop.set()
        await asyncio.wait([holder], timeout=CLOSE_TIMEOUT)
        if not holder.done():
            holder.cancel()

    def _tools(self, listed: list[Any]) -> tuple[dict[str, Tool], dict[str, str]]:
        entry, tools, remote_names = self.entry, {}, {}
        for remote in listed:
            if entry.allowed_tools is not None and not _matches(remote.name, entry.allowed_tools):
                continue
            read_only = bool(remote.annotations and remote.annotations.read_only_hint)
            allowed = read_only or _matches(remote.name, entry.always_allow)
            description = (remote.description or remote.title or remote.name)[:DESCRIPTION_LIMIT]
            name = tool_name(self.name, remote.name)
            remote_names[name] = remote.name
            tools[name] = Tool.described(
                name,
                self._function(remote.name),
                description=f"[MCP server {self.name}] {description}",
                parameters=remote.input_schema or {"type": "object", "properties": {}},
                read_only=read_only,
                asks="never" if allowed else "always",
                time_limit=CONNECT_TIMEOUT + entry.timeout + CLOSE_TIMEOUT,
            )
        return tools, remote_names

    def _function(self, remote: str) -> Any:
        def call(ctx: ToolContext, args: JsonArguments) -> ToolOutput:
            return self.call(remote, args.model_dump(), ctx.cancel)

        return call

    def _log_path(self) -> Path:
        folder = self._manager.logs / "mcp"
        folder.mkdir(parents=True, exist_ok=True)
        return folder / f"{re.sub(r'[^A-Za-z0-9_.-]', '_', self.name)[:100]}.txt"

    def _stderr_tail(self) -> str:
        """The last lines the server wrote to stderr in this run, as ` (stderr: …)`."""
        if self.entry.transport != "stdio":
            return ""
        try:
            with self._log_path().open("rb") as file:
                file.seek(self._log_start)
                text = file.read().decode("utf-8", "replace").strip()
        except OSError:
            return ""
        tail = " ".join(text[-STDERR_TAIL_CHARS:].split())
        return f" (stderr: …{tail})" if tail else ""


class McpManager:
    """Every configured server; the registry's source of MCP tools."""

    def __init__(
        self, config: McpConfig, *, workspace: Path, logs: Path, use_proxy: bool = False
    ) -> None:
        self.workspace, self.logs, self.use_proxy = workspace, logs, use_proxy
        self.problems = config.problems
        self.servers = {name: McpServer(server, self) for name, server in config.servers.items()}
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
        return {
            "servers": [s.status() for s in self.servers.values()],
            "problems": list(self.problems),
        }

    def restart(self, name: str) -> None:
        """Reconnect one server now (KeyError for an unknown one)."""
        server = self.servers[name]
        if server.state == "disabled":
            raise ValueError(f"MCP server {name} is disabled: {server.error}")
        server.open_soon()

    def close(self) -> None:
        """Close every connection (stdio servers are stopped) and the loop thread."""
        if self._loop is None:
            return
        closing = [self._loop.submit(s._disconnect()) for s in self.servers.values()]
        for pending in closing:
            with contextlib.suppress(Exception):
                pending.wait(CLOSE_TIMEOUT + 1)
        self._loop.stop()
        self._loop = None


async def _list_tools(client: Client) -> list[Any]:
    tools, cursor = [], None
    for _ in range(MAX_TOOL_PAGES):
        page = await client.list_tools(cursor=cursor)
        tools += page.tools
        cursor = page.next_cursor
        if cursor is None:
            break
    return tools


def _output(result: Any) -> ToolOutput:
    """A CallToolResult as text for the model; ToolError when the server says it failed."""
    parts: list[str] = []
    for block in result.content:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
        elif kind in ("image", "audio"):
            size = len(block.data) * 3 // 4
            parts.append(f"[{kind} {block.mime_type}, {size:,} bytes, not shown]")
        elif kind == "resource_link":
            parts.append(f"[resource {block.uri}]")
        elif kind == "resource":
            text = getattr(block.resource, "text", None)
            parts.append(text if text is not None else f"[resource {block.resource.uri}, binary]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    text = "\n".join(parts) or "(no output)"
    if result.is_error:
        raise ToolError(text)
    return ToolOutput(text)


def _matches(name: str, patterns: list[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)


def _target(entry: ServerEntry) -> str:
    """What the server is, without arguments, headers or a query (they may hold secrets)."""
    if entry.transport == "stdio":
        return Path(entry.command or "").name
    return (entry.url or "").split("?")[0].split("#")[0]


def _failure(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return f"no answer within {CONNECT_TIMEOUT:g} s"
    return _describe(exc)


def _describe(exc: BaseException) -> str:
    """One line for an error, unwrapping anyio's exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc) or type(exc).__name__
    return " ".join(text.split())[:300]


def build_manager(settings: Settings) -> McpManager:
    """The servers of the user's file and of the workspace's; none is started yet."""
    user_file, workspace_file = settings.mcp_files()
    config = load_config(user_file, workspace_file, trust_workspace=settings.mcp_trust_workspace)
    return McpManager(
        config,
        workspace=settings.workspace,
        logs=settings.data_dir / "logs",
        use_proxy=settings.use_proxy,
    )
