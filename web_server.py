"""The web workspace: the Flask app factory, start-up and shutdown (PROTOCOL §1, §3)."""

from __future__ import annotations

import ipaddress
import logging
import os
import secrets
import signal
import sys
import time
from collections.abc import Callable
from types import FrameType
from typing import Any

from flask import Flask
from flask_socketio import SocketIO

from core.events import Event
from core.services import build_services
from core.web_terminal import TerminalHub
from utils.settings import Settings
from web_events import register_socket_handlers
from web_routes import routes
from web_state import AsyncMode, WebState

log = logging.getLogger(__name__)
SHUTDOWN_GRACE_SECONDS = 3.0
SIGNAL_POLL_SECONDS = 0.2


def create_app(settings: Settings, *, async_mode: AsyncMode = "threading") -> Flask:
    """Build the app; the Socket.IO server is `app.extensions["socketio"]`."""
    services = build_services(settings)
    app = Flask(__name__, template_folder="templates", static_folder="static")
    app.config["MAX_CONTENT_LENGTH"] = 16 * 1024 * 1024
    socketio = SocketIO()

    socketio.init_app(
        app,
        async_mode=async_mode,
        cors_allowed_origins=origin_checker(settings.allowed_origins),
        max_http_buffer_size=16 * 1024 * 1024,
        ping_interval=10,
        ping_timeout=20,
    )

    green = async_mode == "eventlet"

    def send(event: Event) -> None:
        socketio.emit(event.name, event.to_wire(), to=event.conversation_id)
        if green:  # let the emit leave now rather than at the stream's end
            socketio.sleep(0)

    state = WebState(
        settings,
        services,
        socketio,
        TerminalHub(services, send),
        settings.web_token or secrets.token_urlsafe(24),
        async_mode,
    )
    app.extensions["agent"] = state
    app.register_blueprint(routes)
    register_socket_handlers(socketio, state)
    return app


def _normal_origin(origin: str) -> str:
    return origin.strip().rstrip("/").lower()


def origin_checker(allowed: list[str]) -> Callable[[str | None, dict[str, Any]], bool]:
    """Accept no Origin (not a browser), the server's own, or one in AGENT_ALLOWED_ORIGINS."""
    extra = {_normal_origin(o) for o in allowed}

    def origin_allowed(origin: str | None, environ: dict[str, Any]) -> bool:
        if origin is None:
            return True
        own = f"{environ.get('wsgi.url_scheme', 'http')}://{environ.get('HTTP_HOST', '')}"
        candidate = _normal_origin(origin)
        allowed_here = candidate == _normal_origin(own) or candidate in extra
        if not allowed_here:
            log.warning("socket refused: foreign origin", extra={"fields": {"origin": origin}})
        return allowed_here

    return origin_allowed


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def serve(settings: Settings, *, host: str, port: int, async_mode: AsyncMode) -> int:
    """Run the web workspace until interrupted (SIGINT or SIGTERM)."""
    app = create_app(settings, async_mode=async_mode)
    state: WebState = app.extensions["agent"]
    state.start_watcher()
    _stop_on_signals(state)
    shown = "127.0.0.1" if host in ("0.0.0.0", "::") else host
    if not _is_loopback(host):
        print(
            f"WARNING: listening on {host}: anyone who can reach this machine and has the "
            "token can run commands in your workspace.",
            file=sys.stderr,
            flush=True,
        )
    print(f"Workspace Agent: http://{shown}:{port}/?token={state.token}", flush=True)
    print(
        f"workspace {settings.workspace} · data {settings.data_dir} · {async_mode} mode", flush=True
    )
    if state.services.provider.problem is not None:
        print(f"note: {state.services.provider.problem}", flush=True)
    log.info(
        "server started", extra={"fields": {"host": host, "port": port, "async_mode": async_mode}}
    )
    try:
        state.socketio.run(app, host=host, port=port, allow_unsafe_werkzeug=True, log_output=False)
    finally:
        if state.watcher is not None:
            state.watcher.stop()
    return 0


def _stop_on_signals(state: WebState) -> None:
    """On SIGINT/SIGTERM: cancel running tasks, let them record their end, then exit.

    The handler only raises a flag that a background task polls: a signal handler must not
    block, eventlet's hub would not wake for a task spawned from it, and eventlet's server
    would wait for open WebSocket connections before returning.
    """

    def shutdown_when_asked() -> None:
        while not state.stopping:
            state.socketio.sleep(SIGNAL_POLL_SECONDS)
        running = state.hub.running()
        for terminal in running:
            terminal.cancel()
        deadline = time.monotonic() + SHUTDOWN_GRACE_SECONDS
        while state.hub.running() and time.monotonic() < deadline:
            state.socketio.sleep(0.05)
        if state.watcher is not None:
            state.watcher.stop()
        log.info("server stopped", extra={"fields": {"cancelled_tasks": len(running)}})
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)

    def on_signal(signum: int, frame: FrameType | None) -> None:
        state.stopping = True

    state.socketio.start_background_task(shutdown_when_asked)
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
