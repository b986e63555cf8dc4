"""The Socket.IO op that opens an app (§4.1 open_app): a port a conversation's background
process listens on, through the app proxy (web/app_proxy/) on an origin of its own."""

from __future__ import annotations

from typing import Any

from flask import request
from flask_socketio import SocketIO

from modules.sandbox.factory import sessions_of
from protocol.errors import failure
from protocol.requests import OpenApp
from web.access import HostGuard, host_name
from web.app_proxy import AppNotOpen, AppProxy
from web.handlers import acked
from web.state import WebState


def register_app_handlers(socketio: SocketIO, state: WebState, bind_host: str) -> None:
    """open_app, where the runner keeps sandbox sessions (not_configured elsewhere); the
    apps close with the server."""
    found = sessions_of(state.services.runner)
    hosts = HostGuard(
        lambda environ, start: [], bind_host=bind_host, allowed=state.settings.allowed_hosts
    )
    proxy = None if found is None else AppProxy(found, bind_host, hosts.accepts)
    if proxy is not None:
        state.closers.append(proxy.close)

    @socketio.on("open_app")
    @acked(OpenApp)
    def on_open_app(msg: OpenApp) -> dict[str, Any]:
        state.hub.get(msg.conversation_id)  # not_found for an unknown one
        if proxy is None:
            kind = state.services.runner.kind
            return failure("not_configured", f"this server's sandbox ({kind}) runs no apps")
        try:
            opened = proxy.open(
                msg.conversation_id, msg.process_id, msg.port, host_name(request.host)
            )
        except AppNotOpen as exc:
            return failure("not_found", str(exc))
        return {"ok": True, "url": opened.url, "process_id": opened.process_id, "port": opened.port}
