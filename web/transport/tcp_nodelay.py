"""Sends a WebSocket's small frames at once: TCP_NODELAY on the connection of each upgrade.

The connection is taken from the WSGI environ, by what the two servers put there (neither key
is in the WSGI spec):
- Werkzeug 3.1.9's development server (threading mode): `environ["werkzeug.socket"]`, the
  request handler's connection (WSGIRequestHandler.make_environ);
- eventlet 0.41.3's `eventlet.wsgi` (eventlet mode): `environ["eventlet.input"].get_socket()`,
  the wsgi.Input's connection.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Callable
from typing import Any

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Any]


class NoDelay:
    """WSGI middleware: a token is a frame of a few dozen bytes, and with Nagle's algorithm the
    kernel holds such a frame until the client acknowledges the one before; the client delays
    that acknowledgement up to 40 ms, so every busy connection would add that much latency."""

    def __init__(self, app: WsgiApp) -> None:
        self.app = app

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        if environ.get("HTTP_UPGRADE", "").lower() == "websocket":
            sock = connection_socket(environ)
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return self.app(environ, start_response)


def connection_socket(environ: dict[str, Any]) -> socket.socket | None:
    """The client's socket: Werkzeug's (threading mode) or eventlet.wsgi's."""
    sock = environ.get("werkzeug.socket")
    if sock is None and "eventlet.input" in environ:
        sock = environ["eventlet.input"].get_socket()
    return sock if hasattr(sock, "setsockopt") else None
