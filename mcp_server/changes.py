"""Workspace changes (modules.workspace.file_watcher batches) and skill changes as MCP
notifications, in both of the protocol's eras:

- handshake era (up to 2025-11-25): a client sends `resources/subscribe` for a URI and gets
  `notifications/resources/updated` on its connection; a client that listed or subscribed gets
  `notifications/resources/list_changed` when files appear or disappear; a client that listed
  the prompts gets `notifications/prompts/list_changed` when a skill is added, removed or
  edited. Over HTTP a connection is its `mcp-session-id`, forgotten when the session ends;
- 2026-07-28: a client opens `subscriptions/listen` (the SDK's ListenHandler) and the same
  events reach it through the SDK's subscription bus.

The watcher calls `on_changes` from its own thread; the notifications are sent on the server's
asyncio loop (`attach` names it).
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from typing import Any

from mcp.server import ServerRequestContext
from mcp.server.session import ServerSession
from mcp.server.subscriptions import (
    InMemorySubscriptionBus,
    ListenHandler,
    PromptsListChanged,
    ResourcesListChanged,
    ResourceUpdated,
)

from mcp_server.resources import uri_for

log = logging.getLogger(__name__)

MAX_SESSIONS = 1_000  # handshake-era connections remembered; the oldest is forgotten first
MAX_URIS_PER_SESSION = 1_000
SESSION_HEADER = "mcp-session-id"


class _Connection:
    """A handshake-era client: the session to notify through, the URIs it subscribed to and
    whether it listed the prompts."""

    def __init__(self, session: ServerSession) -> None:
        self.session = session
        self.uris: set[str] = set()
        self.prompts = False


class ResourceChanges:
    def __init__(self) -> None:
        self.bus = InMemorySubscriptionBus()
        self.listen = ListenHandler(self.bus)
        self._connections: OrderedDict[str, _Connection] = OrderedDict()
        self._loop: asyncio.AbstractEventLoop | None = None

    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    # --- the handshake era's requests --------------------------------------------------------

    def seen(self, ctx: ServerRequestContext[Any]) -> _Connection:
        """The connection of this request, remembered (it listed or subscribed)."""
        request = ctx.request
        headers = getattr(request, "headers", None)
        key = headers.get(SESSION_HEADER, "") if headers is not None else ""  # "": stdio
        connection = self._connections.get(key)
        if connection is None:
            connection = self._connections[key] = _Connection(ctx.session)
            while len(self._connections) > MAX_SESSIONS:
                self._connections.popitem(last=False)
        else:
            connection.session = ctx.session
            self._connections.move_to_end(key)
        return connection

    def subscribe(self, ctx: ServerRequestContext[Any], uri: str) -> None:
        connection = self.seen(ctx)
        if len(connection.uris) >= MAX_URIS_PER_SESSION and uri not in connection.uris:
            raise ValueError(f"at most {MAX_URIS_PER_SESSION} subscriptions per connection")
        connection.uris.add(uri)

    def unsubscribe(self, ctx: ServerRequestContext[Any], uri: str) -> None:
        self.seen(ctx).uris.discard(uri)

    def prompts_listed(self, ctx: ServerRequestContext[Any]) -> None:
        self.seen(ctx).prompts = True

    def forget(self, session_id: str) -> None:
        """The session ended (over HTTP: deleted by its client, idle too long, or failed)."""
        connection = self._connections.pop(session_id, None)
        if connection is not None:
            fields = {"session": session_id[:8], "subscriptions": len(connection.uris)}
            log.info("mcp session ended", extra={"fields": fields})

    # --- the watcher's batches ---------------------------------------------------------------

    def on_changes(self, changes: list[dict[str, Any]], refresh: list[dict[str, Any]]) -> None:
        """A batch of the watcher (`file_tree`'s shape), from any thread."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        updated, listing = affected(changes, refresh, self._subscribed())
        if updated or listing:
            asyncio.run_coroutine_threadsafe(self._notify(updated, listing), loop)

    def _subscribed(self) -> set[str]:
        uris: set[str] = set()
        for connection in list(self._connections.values()):
            uris |= connection.uris
        return uris

    async def _notify(self, updated: list[str], listing: bool) -> None:
        for uri in updated:
            await self.bus.publish(ResourceUpdated(uri=uri))
        if listing:
            await self.bus.publish(ResourcesListChanged())
        for key, connection in list(self._connections.items()):
            try:
                for uri in updated:
                    if uri in connection.uris:
                        await connection.session.send_resource_updated(uri)
                if listing:
                    await connection.session.send_resource_list_changed()
            except Exception as exc:
                self._gone(key, exc)

    async def prompts_changed(self) -> None:
        """A skill was added, removed or edited (on the server's loop)."""
        await self.bus.publish(PromptsListChanged())
        for key, connection in list(self._connections.items()):
            if connection.prompts:
                try:
                    await connection.session.send_prompt_list_changed()
                except Exception as exc:
                    self._gone(key, exc)

    def _gone(self, key: str, exc: Exception) -> None:
        """A send failed: the connection ended without the session's end being seen."""
        log.info("mcp connection gone", extra={"fields": {"error": repr(exc)[:200]}})
        self._connections.pop(key, None)


def affected(
    changes: list[dict[str, Any]], refresh: list[dict[str, Any]], subscribed: set[str]
) -> tuple[list[str], bool]:
    """The URIs a batch updated (every file named; a subscribed one under a changed or folded
    folder too) and whether files appeared or disappeared."""
    updated: dict[str, None] = {}
    folders: list[str] = [folder["path"] for folder in refresh]
    listing = bool(refresh)
    for change in changes:
        paths = [change["path"], *([change["dest_path"]] if change.get("dest_path") else [])]
        if change["event"] != "modified":
            listing = True
        if change.get("is_dir"):
            folders += paths
        else:
            updated.update(dict.fromkeys(uri_for(path) for path in paths))
    for folder in folders:
        prefix = uri_for(folder).rstrip("/") + "/"
        updated.update(dict.fromkeys(uri for uri in sorted(subscribed) if uri.startswith(prefix)))
    return list(updated), listing
