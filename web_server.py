"""The web workspace: the Flask app factory, start-up and shutdown (docs/protocol.md §1, §3)."""

from __future__ import annotations

import errno
import gc
import logging
import os
import signal
import socket
import sys
import threading
import time
from types import FrameType
from typing import Any

from flask import Flask
from flask_socketio import SocketIO

from core.process_relay import ProcessRelay
from core.services import build_services
from modules.sandbox.factory import sessions_of
from protocol.events import Event
from utils.large_blocks import keep_large_blocks
from utils.settings import Settings
from web.access import HostGuard, OriginCheck, OriginGuard, is_loopback, origin_checker
from web.app_ops import register_app_handlers
from web.changes_ops import register_changes_handlers
from web.chunked_input import ChunkedInput
from web.cluster import Cluster, LocalCluster
from web.demo_reset import register_demo_handlers
from web.editor_ops import register_editor_handlers
from web.handlers import register_socket_handlers
from web.hub import TerminalHub
from web.manage import register_manage_handlers
from web.mcp_ops import register_mcp_handlers
from web.payload_depth import DepthBoundJson
from web.process_ops import register_process_handlers
from web.routes import routes
from web.settings_ops import register_settings_handlers
from web.state import AsyncMode, WebState
from web.terminal_ops import register_terminal_handlers
from web.token_file import web_token
from web.transport import SERVER_OPTIONS, install

log = logging.getLogger(__name__)
MEGABYTE = 1024 * 1024
MAX_REQUEST_BYTES = MEGABYTE  # a socket payload or HTTP body; send_message text fits well
SHUTDOWN_GRACE_SECONDS = 3.0
SIGNAL_POLL_SECONDS = 0.2


def create_app(
    settings: Settings, *, async_mode: AsyncMode = "threading", host: str = "127.0.0.1"
) -> Flask:
    """Build the app for a server bound to `host`; Socket.IO is `app.extensions["socketio"]`."""
    services = build_services(settings)
    app = Flask(__name__, template_folder="templates", static_folder="static")
    app.config["MAX_CONTENT_LENGTH"] = MAX_REQUEST_BYTES
    socketio = SocketIO()
    cluster = _cluster(settings)
    queue = _message_queue(settings.redis_url) if settings.redis_url else {}

    origin_allowed = origin_checker(settings.allowed_origins)
    socketio.init_app(
        app,
        async_mode=async_mode,
        **queue,
        cors_allowed_origins=origin_allowed,
        max_http_buffer_size=MAX_REQUEST_BYTES,
        json=DepthBoundJson,  # a payload nested too deeply decodes to what is answered bad_request
        **SERVER_OPTIONS,
        ping_interval=10,
        ping_timeout=20,
    )
    transport = install(
        socketio,
        app,
        client_queue_bytes=int(settings.client_queue_mb * MEGABYTE),
        scaled_out=bool(settings.redis_url),
    )
    _guard(app, host, settings.allowed_hosts, origin_allowed)
    app.wsgi_app = ChunkedInput(app.wsgi_app)  # type: ignore[method-assign]

    def send(event: Event) -> None:
        transport.send(event)
        state.taps.publish(event)

    def to_client(sid: str, name: str, payload: dict[str, Any]) -> None:  # a join's replay
        with transport.replay():
            socketio.emit(name, payload, to=sid)

    def enter_room(sid: str, room: str) -> None:  # a client of another process: via the queue
        socketio.server.enter_room(sid, room, namespace="/")

    hub = TerminalHub(services, send, cluster=cluster, to_client=to_client, enter_room=enter_room)
    token = web_token(settings.web_token, settings.data_dir)
    state = WebState(settings, services, socketio, hub, token.value, async_mode, transport)
    state.token_note = token.note
    app.extensions["agent"] = state
    app.register_blueprint(routes)
    register_socket_handlers(socketio, state)
    register_manage_handlers(socketio, state)
    register_demo_handlers(socketio, state)
    register_mcp_handlers(socketio, state)
    register_process_handlers(socketio, state)
    register_editor_handlers(socketio, state)
    register_app_handlers(socketio, state, host)
    register_terminal_handlers(socketio, state)
    register_changes_handlers(socketio, state)
    register_settings_handlers(socketio, state)
    cluster.serve(hub.handle, socketio.start_background_task)
    sessions = sessions_of(services.runner)
    if sessions is not None:  # its processes' changes go onto their conversations' timelines
        relay = ProcessRelay(
            sessions,
            hub.report_process,
            transport.keeping_up,
            socketio.start_background_task,
            socketio.sleep,
        )
        state.closers.append(relay.close)
    state.closers.append(cluster.close)
    state.closers.append(transport.close)
    return app


def _warm_up(state: WebState) -> None:
    """Get ready for the first message (the SDK imported, the undo baseline begun), then keep
    what start-up built out of full collections: it lives as long as the server."""
    state.services.warm_up()
    gc.freeze()


def _guard(app: Flask, host: str, hosts: list[str], origin_allowed: OriginCheck) -> None:
    """Outermost, so the Socket.IO handshake is checked like every HTTP request: the Host of
    everything, then the Origin of whatever changes something."""
    app.wsgi_app = HostGuard(  # type: ignore[method-assign]
        OriginGuard(app.wsgi_app, origin_allowed), bind_host=host, allowed=hosts
    )


def _message_queue(url: str) -> dict[str, Any]:
    """Room emits across processes (Flask-SocketIO's Redis queue), telling this process's
    clients when some may have been lost."""
    # the redis client: only when scaled out
    from web.cluster.message_queue import WatchedRedisManager

    return {"client_manager": WatchedRedisManager(url, channel="agent-socketio")}


def _cluster(settings: Settings) -> Cluster:
    """The other server processes sharing the data dir (AGENT_REDIS_URL), or none."""
    if not settings.redis_url:
        return LocalCluster()
    from web.cluster.redis_cluster import RedisCluster  # the redis client: only when scaled out

    return RedisCluster(settings.redis_url)


def serve(settings: Settings, *, host: str, port: int, async_mode: AsyncMode) -> int:
    """Run the web workspace until interrupted (SIGINT or SIGTERM)."""
    check_port(host, port)  # before anything starts, and before a URL is printed
    keep_large_blocks()  # a flood of process output makes and frees them by the hundred
    app = create_app(settings, async_mode=async_mode, host=host)
    state: WebState = app.extensions["agent"]
    if async_mode == "threading":  # it listens meanwhile: the SDK's import takes a second
        threading.Thread(target=_warm_up, args=(state,), name="warm-up", daemon=True).start()
    else:  # in a green thread the import would stall eventlet's loop: before it listens
        _warm_up(state)
    a2a_url = _start_a2a(state, host, port) if settings.a2a else None
    mcp_url = _start_mcp_http(state, host, port) if settings.mcp_http else None
    state.start_watcher()
    _stop_on_signals(state)
    shown = "127.0.0.1" if host in ("0.0.0.0", "::") else host
    if not is_loopback(host):
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
    if a2a_url is not None:
        print(
            f"A2A: {a2a_url} (Agent Card: {a2a_url}.well-known/agent-card.json; "
            "bearer token: the web token)",
            flush=True,
        )
    if mcp_url is not None:
        print(f"MCP: {mcp_url} (streamable HTTP; bearer token: the web token)", flush=True)
    if state.token_note is not None:
        print(f"note: {state.token_note}", flush=True)
    if state.services.provider.problem is not None:
        print(f"note: {state.services.provider.problem}", flush=True)
    log.info(
        "server started", extra={"fields": {"host": host, "port": port, "async_mode": async_mode}}
    )
    try:
        state.socketio.run(app, host=host, port=port, allow_unsafe_werkzeug=True, log_output=False)
    finally:
        for close in state.closers:
            close()
        if state.watcher is not None:
            state.watcher.stop()
        state.services.close()
    return 0


class PortTaken(OSError):
    """The web port is in use or may not be bound; the message says how to pick another."""


def check_port(host: str, port: int) -> None:
    """Raise PortTaken unless the server could listen on host:port now (bound as the server
    binds it, reusing an address a closed server left in TIME_WAIT)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                why = "is already in use by another program: stop it, or pick another port"
            elif exc.errno == errno.EACCES:
                why = "may not be used by this user (below 1024 needs root): pick another port"
            else:
                raise
            other = port + 1 if port < 65535 else 5050
            raise PortTaken(
                f"port {port} on {host} {why} "
                f"(python main.py web --port {other}, or make run PORT={other})"
            ) from None


def _start_a2a(state: WebState, host: str, port: int) -> str:
    """Serve A2A beside the web server (AGENT_A2A); returns its URL. Raises OSError."""
    from a2a_server.server import A2AServer  # the SDK, starlette and uvicorn: only when enabled

    server = A2AServer(state, host=host, port=state.settings.a2a_port or port + 1)
    server.start()
    state.closers.append(server.stop)
    return server.url


def _start_mcp_http(state: WebState, host: str, port: int) -> str:
    """Serve MCP over streamable HTTP beside the web server (AGENT_MCP_HTTP); returns its URL.
    Raises OSError."""
    from mcp_server.http import McpHttpServer  # the SDK, starlette and uvicorn: only when enabled

    server = McpHttpServer(state, host=host, port=state.settings.mcp_http_port or port + 2)
    server.start()
    state.closers.append(server.stop)
    return server.url


def _stop_on_signals(state: WebState) -> None:
    """On SIGINT/SIGTERM: interrupt running tasks, let them record their end, then exit.

    The handler only raises a flag that a background task polls: a signal handler must not
    block, eventlet's hub would not wake for a task spawned from it, and eventlet's server
    would wait for open WebSocket connections before returning.
    """

    def shutdown_when_asked() -> None:
        while not state.stopping:
            state.socketio.sleep(SIGNAL_POLL_SECONDS)
        running = state.hub.running()
        for terminal in running:  # each ends as `interrupted`, as after a crash, not `cancelled`
            terminal.cancel("shutdown")
        deadline = time.monotonic() + SHUTDOWN_GRACE_SECONDS
        while state.hub.running() and time.monotonic() < deadline:
            state.socketio.sleep(0.05)
        for terminal in running:
            terminal.wait_done_sent()
        try:
            for close in state.closers:  # the A2A and MCP servers
                close()
            if state.watcher is not None:
                state.watcher.stop()
            state.services.close()  # MCP servers stopped, containers removed
        except Exception:  # it exits all the same
            log.exception("closing at shutdown failed")
        log.info("server stopped", extra={"fields": {"interrupted_tasks": len(running)}})
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)

    def on_signal(signum: int, frame: FrameType | None) -> None:
        state.stopping = True

    state.socketio.start_background_task(shutdown_when_asked)
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
