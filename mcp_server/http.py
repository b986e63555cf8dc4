"""MCP over streamable HTTP beside the web server (AGENT_MCP_HTTP): the same WorkspaceServer as
`main.py mcp`, its endpoint `/mcp` on its own port (AGENT_MCP_HTTP_PORT, default the web port
+ 2), under uvicorn on a loop thread of its own (web.asgi), bound to the web server's host.

Every request passes the web server's Host check, an Origin check (a browser page of an origin
not in AGENT_ALLOWED_ORIGINS gets 403) and carries the web token as `Authorization: Bearer`.
The web server's file watcher feeds the resource notifications. SSE streams are resumable
(mcp_server.events): a client that lost one reconnects with `Last-Event-ID` and is sent what it
missed. Imported only when enabled.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
from mcp.server.auth.middleware.bearer_auth import AuthorizationContext
from mcp.server.streamable_http import StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.routing import Route

from mcp_server.events import RETRY_MILLISECONDS, EventLog
from mcp_server.server import WorkspaceServer
from web.access import HostGuard, origin_checker
from web.asgi import AccessGuard, AsgiThread
from web.state import WebState

PATH = "/mcp"
MAX_REQUEST_BYTES = 1024 * 1024


class _SessionManager(StreamableHTTPSessionManager):
    """The SDK's manager, each session storing its events through its own view of the log and
    `on_end` told when the SDK ends a session (deleted by its client, idle, failed)."""

    def __init__(self, log: EventLog, on_end: Callable[[str], None], **options: Any) -> None:
        super().__init__(**options)
        self.log, self.on_end = log, on_end

    def _admit_session(
        self, requestor: AuthorizationContext | None
    ) -> StreamableHTTPServerTransport | None:
        transport = super()._admit_session(requestor)
        if transport is not None and transport.mcp_session_id is not None:
            transport._event_store = self.log.for_session(transport.mcp_session_id)
        return transport

    async def _discard_session(
        self, session_id: str, transport: StreamableHTTPServerTransport
    ) -> None:
        await super()._discard_session(session_id, transport)
        self.log.forget(session_id)
        self.on_end(session_id)


class McpHttpServer:
    """The app under uvicorn; `start` waits until it listens, `stop` ends it and its tools'
    runner."""

    def __init__(self, state: WebState, *, host: str, port: int) -> None:
        settings = state.settings
        self.workspace_server = WorkspaceServer(settings)
        shown = "127.0.0.1" if host in ("0.0.0.0", "::") else host
        self.url = f"http://{shown}:{port}{PATH}"
        changes = self.workspace_server.changes
        # Host and Origin are checked by the AccessGuard, as the web server checks them.
        manager = _SessionManager(
            EventLog(),
            changes.forget,
            app=self.workspace_server.server,
            security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False),
            max_request_body_size=MAX_REQUEST_BYTES,
            retry_interval=RETRY_MILLISECONDS,
        )
        watch_skills = self.workspace_server.watch_skills

        @asynccontextmanager
        async def lifespan(app: Starlette) -> AsyncIterator[None]:
            changes.attach(asyncio.get_running_loop())
            async with manager.run(), anyio.create_task_group() as tasks:
                tasks.start_soon(watch_skills)
                yield
                tasks.cancel_scope.cancel()

        app = Starlette(
            routes=[Route(PATH, endpoint=StreamableHTTPASGIApp(manager))], lifespan=lifespan
        )
        hosts = HostGuard(lambda environ, start: [], bind_host=host, allowed=settings.allowed_hosts)
        guarded = AccessGuard(
            app,
            state=state,
            hosts=hosts,
            where="mcp",
            max_bytes=MAX_REQUEST_BYTES,
            origin_allowed=origin_checker(settings.allowed_origins),
        )
        self._thread = AsgiThread(
            state, guarded, name="MCP server", host=host, port=port, lifespan=True
        )
        self.state = state

    def start(self) -> None:
        """Listen, or raise OSError (a port already taken)."""
        self._thread.start("AGENT_MCP_HTTP_PORT")
        self.state.file_listeners.append(self.workspace_server.changes.on_changes)

    def stop(self) -> None:
        self._thread.stop()
        self.workspace_server.close()
