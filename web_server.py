"""The web workspace: Flask app factory, access control, Socket.IO events (PROTOCOL §3, §4)."""

from __future__ import annotations

import hmac
import ipaddress
import logging
import os
import secrets
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import FrameType
from typing import Any, Literal

from flask import Flask, request
from flask_socketio import SocketIO, join_room

from core.services import AgentServices, build_services
from core.web_terminal import TerminalHub
from modules.file_watcher import WorkspaceWatcher
from utils.conversation_store import LEAF
from utils.settings import Settings
from web_events import (
    Approve,
    Cancel,
    ConversationRef,
    Empty,
    Join,
    SendMessage,
    acked,
    failure,
    register_review_handlers,
)
from web_routes import (
    conversation_payload,
    conversations_payload,
    routes,
    status_payload,
    tree_payload,
)

log = logging.getLogger(__name__)
AsyncMode = Literal["threading", "eventlet"]
SHUTDOWN_GRACE_SECONDS = 3.0
SIGNAL_POLL_SECONDS = 0.2


@dataclass
class WebState:
    """What the request and event handlers share; one per app."""

    settings: Settings
    services: AgentServices
    socketio: SocketIO
    hub: TerminalHub
    token: str
    async_mode: AsyncMode
    watcher: WorkspaceWatcher | None = None
    stopping: bool = False

    def token_ok(self, candidate: object) -> bool:
        """Constant-time check; any string is safe to pass (compare_digest refuses non-ASCII)."""
        if not isinstance(candidate, str):
            return False
        given = candidate.encode("utf-8", "surrogatepass")
        return hmac.compare_digest(given, self.token.encode("utf-8", "surrogatepass"))

    def start_watcher(self) -> None:
        """Push `file_tree` events to every client whenever the workspace changes."""

        def broadcast(changes: list[dict[str, Any]]) -> None:
            self.socketio.emit("file_tree", {"changes": changes})
            self.socketio.sleep(0)

        self.watcher = WorkspaceWatcher(
            self.services.workspace.root,
            ignore=[self.settings.data_dir],
            on_changes=broadcast,
            start_background_task=self.socketio.start_background_task,
        )
        self.watcher.start()


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

    def send(event: str, payload: dict[str, Any], room: str) -> None:
        socketio.emit(event, payload, to=room)
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
    _register_task_handlers(socketio, state)
    _register_reading_handlers(socketio, state)
    register_review_handlers(socketio, state)
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


def _register_task_handlers(socketio: SocketIO, state: WebState) -> None:
    hub, services = state.hub, state.services

    @socketio.on("connect")
    def on_connect(auth: Any = None) -> bool:
        token = auth.get("token") if isinstance(auth, dict) else None
        if not state.token_ok(token):
            log.warning("socket refused: missing or wrong token")
            return False
        return True

    @socketio.on("send_message")
    @acked(SendMessage)
    def on_send(msg: SendMessage) -> dict[str, Any]:
        problem = services.provider.problem
        if problem is not None:
            return failure("not_configured", problem)
        terminal = hub.get(msg.conversation_id) if msg.conversation_id else hub.new()

        def enter(record: dict[str, Any]) -> None:
            hub.register(terminal)
            join_room(record["conversation_id"])

        # Absent: under the current leaf; an explicit null: a new root (editing the first message).
        parent = msg.parent_id if "parent_id" in msg.model_fields_set else LEAF
        record = terminal.start(
            msg.text,
            parent_id=parent,
            mode=msg.mode,
            approval=msg.approval,
            on_begun=enter,
            run_in_background=socketio.start_background_task,
        )
        return {
            "ok": True,
            "conversation_id": record["conversation_id"],
            "message_id": record["id"],
        }

    @socketio.on("cancel")
    @acked(Cancel)
    def on_cancel(msg: Cancel) -> dict[str, Any]:
        if hub.get(msg.conversation_id).cancel():
            return {"ok": True}
        return failure("not_running", "no task is running in this conversation")

    @socketio.on("approve")
    @acked(Approve)
    def on_approve(msg: Approve) -> dict[str, Any]:
        if hub.get(msg.conversation_id).approve(msg.call_id, msg.approved, always=msg.always):
            return {"ok": True}
        return failure("not_waiting", f"no call {msg.call_id!r} is waiting for approval")

    @socketio.on("join")
    @acked(Join)
    def on_join(msg: Join) -> dict[str, Any]:
        terminal = hub.get(msg.conversation_id)
        sid = request.sid  # type: ignore[attr-defined]

        def deliver(event: str, payload: dict[str, Any]) -> None:
            socketio.emit(event, payload, to=sid)

        terminal.replay(msg.after_seq, deliver, subscribe=lambda: join_room(msg.conversation_id))
        return {"ok": True, "running": terminal.running, "last_seq": terminal.last_seq}


def _register_reading_handlers(socketio: SocketIO, state: WebState) -> None:
    services = state.services

    @socketio.on("list_conversations")
    @acked(Empty)
    def on_list(_: Empty) -> dict[str, Any]:
        return conversations_payload(services)

    @socketio.on("get_conversation")
    @acked(ConversationRef)
    def on_get(msg: ConversationRef) -> dict[str, Any]:
        return conversation_payload(services, msg.conversation_id)

    @socketio.on("get_file_tree")
    @acked(Empty)
    def on_tree(_: Empty) -> dict[str, Any]:
        return tree_payload(services)

    @socketio.on("get_status")
    @acked(Empty)
    def on_status(_: Empty) -> dict[str, Any]:
        return status_payload(state)


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
