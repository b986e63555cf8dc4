"""TCP_NODELAY on a WebSocket's connection (web/transport/tcp_nodelay.py), with real TCP sockets."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest

from web.transport.tcp_nodelay import NoDelay


@pytest.fixture
def connection() -> Iterator[socket.socket]:
    """The server side of a real loopback TCP connection."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        client = socket.create_connection(server.getsockname())
        accepted, _ = server.accept()
        with client, accepted:
            yield accepted


def nodelay(sock: socket.socket) -> bool:
    return bool(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))


def call(environ: dict[str, Any]) -> list[bytes]:
    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        return [b"served"]

    return NoDelay(app)(environ, lambda *a: None)


class EventletInput:
    """What eventlet.wsgi puts in `eventlet.input`: the connection behind `get_socket()`."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock

    def get_socket(self) -> socket.socket:
        return self._sock


def test_a_websocket_upgrade_gets_nodelay_under_werkzeug(connection: socket.socket) -> None:
    assert not nodelay(connection)
    assert call({"HTTP_UPGRADE": "websocket", "werkzeug.socket": connection}) == [b"served"]
    assert nodelay(connection)


def test_a_websocket_upgrade_gets_nodelay_under_eventlet(connection: socket.socket) -> None:
    call({"HTTP_UPGRADE": "WebSocket", "eventlet.input": EventletInput(connection)})
    assert nodelay(connection)


def test_plain_requests_are_left_alone(connection: socket.socket) -> None:
    assert call({"werkzeug.socket": connection}) == [b"served"]
    assert not nodelay(connection)


def test_a_request_without_a_socket_is_still_served() -> None:
    assert call({"HTTP_UPGRADE": "websocket"}) == [b"served"]
