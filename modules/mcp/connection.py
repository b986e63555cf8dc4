"""One configured MCP server: its state, its tools, and the connection while it is open.

A call is bounded by the server's `timeout` and cancelled with the task; a server that died
(noticed when it closes its end of the connection, even while idle) or stopped answering is
marked failed and started again on its next use. The connection is held open by one task on
the host's asyncio loop thread, which enters and leaves the SDK's context (anyio requires
both in the same task).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from modules.mcp.config import ServerConfig, ServerEntry
from modules.mcp.launch import (
    ServerFolders,
    find_command,
    guarded,
    safe_name,
    server_environment,
)
from modules.mcp.tools import Listing, list_tools, output, registry_tools
from modules.mcp.watch import watched
from modules.results import ToolError, ToolOutput
from modules.tools.registry import Tool
from utils.async_loop import LoopThread, Pending
from utils.cancel import CancelToken, TaskCancelled

if TYPE_CHECKING:
    from mcp import Client

log = logging.getLogger(__name__)

CONNECT_TIMEOUT = 30.0
CLOSE_TIMEOUT = 7.0  # the SDK's stdio shutdown: close stdin, 2 s, SIGTERM, 2 s, SIGKILL
STDERR_TAIL_CHARS = 400
CLIENT_NAME = "workspace-agent"
ENDED = "the server closed the connection (it exited?)"

State = Literal["disabled", "starting", "connected", "failed"]


class Host(Protocol):
    """What a server needs from the manager that holds it."""

    workspace: Path  # no stdio server runs from it (modules/mcp/launch.py)
    folders: ServerFolders  # a stdio server's own folder, unless its entry names one
    logs: Path  # stdio servers' stderr goes to logs/mcp/NAME.txt
    use_proxy: bool

    @property
    def loop(self) -> LoopThread: ...


class McpServer:
    """One configured server: its state, its tools, and the connection while it is open."""

    def __init__(self, config: ServerConfig, host: Host) -> None:
        self.config = config
        self.name = config.name
        self.state: State = "starting" if config.enabled else "disabled"
        self.error: str | None = config.problem or (
            "disabled in its configuration" if config.entry and config.entry.disabled else None
        )
        # The tools by namespaced name, and each one's name on the server: replaced together.
        self._listing: Listing = ({}, {})
        self._host = host
        self._client: Client | None = None
        self._stop: asyncio.Event | None = None
        self._holder: asyncio.Task[None] | None = None
        self._opening: Pending[None] | None = None
        self._lock = threading.Lock()
        self._log_start = 0
        self._retired = False  # removed from the configuration, or replaced: never opened again

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
            if self._retired:
                raise ToolError(
                    f"MCP server {self.name} was removed or changed in its configuration"
                )
            if self._opening is None or self._opening.done:
                self.state, self.error = "starting", None
                self._opening = self._host.loop.submit(self._open())
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
        pending = self._host.loop.submit(client.call_tool(remote, arguments))
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
        return output(result)

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
        self._host.loop.submit(self.disconnect())

    def status(self) -> dict[str, Any]:
        entry, (tools, remote) = self.config.entry, self._listing
        return {
            "name": self.name,
            "source": self.config.source,
            "transport": entry.transport if entry else None,
            "target": _target(entry) if entry else None,
            "state": self.state,
            "error": self.error,
            "disabled": bool(entry and entry.disabled),
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
        await self.disconnect()
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[tuple[Client, list[Any]]] = loop.create_future()
        stop = asyncio.Event()
        holder = loop.create_task(self._hold(ready, stop))
        try:
            client, listed = await asyncio.wait_for(asyncio.shield(ready), CONNECT_TIMEOUT)
            if stop.is_set():
                raise ConnectionError(f"{ENDED} right after listing its tools")
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
        if self._retired:  # retire() ran while this connection was being made
            await self.disconnect()
            return
        self._listing = registry_tools(
            self.name,
            self.entry,
            listed,
            self.call,
            time_limit=CONNECT_TIMEOUT + self.entry.timeout + CLOSE_TIMEOUT,
        )
        self.state, self.error = "connected", None
        log.info(
            "MCP server connected",
            extra={"fields": {"server": self.name, "tools": len(self.tools)}},
        )

    async def _hold(self, ready: asyncio.Future[Any], stop: asyncio.Event) -> None:
        """Open the connection, hand it over, keep it until `stop` (set by `disconnect` or when
        the server closes its end), then close it."""
        try:
            async with contextlib.AsyncExitStack() as stack:
                client = await self._connect(stack, stop.set)
                ready.set_result((client, await list_tools(client)))
                await stop.wait()
                if self._stop is stop:  # not disconnect(), which forgets it first
                    self._lost(client, f"{ENDED}{self._stderr_tail()}")
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

    async def _connect(
        self, stack: contextlib.AsyncExitStack, on_end: Callable[[], None]
    ) -> Client:
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
                    trust_env=self._host.use_proxy,
                )

            assert entry.url is not None
            if entry.transport == "sse":
                transport = sse_client(entry.url, httpx_client_factory=http_client)
            else:
                client = await stack.enter_async_context(http_client())
                transport = streamable_http_client(entry.url, http_client=client)
        info = Implementation(name=CLIENT_NAME, version="1")
        return await stack.enter_async_context(Client(watched(transport, on_end), client_info=info))

    def _stdio(self, stack: contextlib.AsyncExitStack) -> Any:
        from mcp import StdioServerParameters
        from mcp.client.stdio import stdio_client

        entry, workspace = self.entry, self._host.workspace
        folder = self.config.working_folder() or self._host.folders.folder(self.name)
        env = server_environment(workspace, folder) | entry.env
        trusted = self.config.from_workspace
        command = find_command(entry.command or "", folder, env, workspace, trusted=trusted)
        command, args = guarded(command, list(entry.args))
        errlog = stack.enter_context(self._log_path().open("a", encoding="utf-8"))
        self._log_start = errlog.tell()
        params = StdioServerParameters(command=command, args=args, env=env, cwd=folder)
        return stdio_client(params, errlog=errlog)

    async def retire(self) -> None:
        """Stop for good: the connection is closed now, or as soon as one being made is."""
        with self._lock:
            self._retired = True
        await self.disconnect()

    async def disconnect(self) -> None:
        """Close the connection, if one is open (a stdio server is stopped)."""
        stop, holder = self._stop, self._holder
        self._client = self._stop = self._holder = None
        if stop is None or holder is None:
            return
        stop.set()
        await asyncio.wait([holder], timeout=CLOSE_TIMEOUT)
        if not holder.done():
            holder.cancel()

    def _log_path(self) -> Path:
        folder = self._host.logs / "mcp"
        folder.mkdir(parents=True, exist_ok=True)
        return folder / f"{safe_name(self.name)}.txt"

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
