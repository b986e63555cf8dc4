"""web.transport.install on a real Werkzeug server (threading mode's) with a real WebSocket
client: everything it puts in place is in place, and an event sent through the Transport
reaches the conversation's room."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import websocket
from flask import Flask
from flask_socketio import SocketIO, join_room
from werkzeug.serving import make_server

from protocol.events import Token
from web.transport import SERVER_OPTIONS, Transport, install
from web.transport.fast_packet import FastPacket

PATIENCE = 30.0
CAP_BYTES = 1024 * 1024


@pytest.fixture
def served() -> Iterator[tuple[SocketIO, Transport, int, list[socket.socket]]]:
    """A bare app with the transport installed, served; the upgraded connections' sockets."""
    app = Flask(__name__)
    socketio = SocketIO()
    socketio.init_app(app, async_mode="threading", **SERVER_OPTIONS)
    transport = install(socketio, app, client_queue_bytes=CAP_BYTES, scaled_out=False)
    upgraded: list[socket.socket] = []
    installed = app.wsgi_app

    def noting(environ: dict[str, Any], start_response: Any) -> Any:  # outside, as the guards
        if environ.get("HTTP_UPGRADE", "").lower() == "websocket":
            upgraded.append(environ["werkzeug.socket"])
        return installed(environ, start_response)

    app.wsgi_app = noting  # type: ignore[method-assign]

    @socketio.on("connect")
    def on_connect(auth: Any = None) -> bool:
        join_room("c1")
        return True

    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield socketio, transport, server.server_port, upgraded
    finally:
        transport.close()
        server.shutdown()
        thread.join(PATIENCE)
        server.server_close()


def received(client: websocket.WebSocket) -> str:
    """The next text frame."""
    frame = client.recv()
    assert isinstance(frame, str), frame
    return frame


def test_install_puts_the_speed_ups_in_place_and_events_go_out_through_it(
    served: tuple[SocketIO, Transport, int, list[socket.socket]],
) -> None:
    socketio, transport, port, upgraded = served
    client = websocket.create_connection(
        f"ws://127.0.0.1:{port}/socket.io/?EIO=4&transport=websocket", timeout=PATIENCE
    )
    try:
        assert received(client).startswith("0{")  # Engine.IO's open
        client.send("40")
        assert received(client).startswith("40{")  # connected, in room c1
        (connection,) = upgraded
        assert connection.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY), "no TCP_NODELAY"
        (engine_socket,) = socketio.server.eio.sockets.values()
        assert hasattr(engine_socket.queue, "queued_bytes"), "the client's queue is not counted"
        assert socketio.server.packet_class is FastPacket
        transport.send(Token(conversation_id="c1", seq=1, message_id="m1", text="hello"))
        frame = received(client)
        assert frame.startswith("42"), frame
        name, payload = json.loads(frame[2:])
        assert name == "token" and payload["text"] == "hello" and payload["seq"] == 1, frame
    finally:
        client.close()
