"""A request body sent in chunks, as eventlet's server hands it on.

eventlet 0.41.3's `eventlet.wsgi` takes apart a body sent with `Transfer-Encoding: chunked`
itself (`environ["wsgi.input"]` gives the data and ends where the body ends) but does not say
so with `wsgi.input_terminated`, the key Werkzeug 3.1.9 reads to know that such a stream may be
read to its end: without it Werkzeug takes the body for empty, and an upload was stored as an
empty file. Werkzeug's own server (threading mode) sets the key itself. The server is known by
the key it puts in the environ, `eventlet.input`, as web/transport/tcp_nodelay.py knows it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class ChunkedInput:
    """WSGI middleware: a chunked body dechunked by eventlet's server is read to its end."""

    def __init__(self, app: WsgiApp) -> None:
        self.app = app

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        chunked = "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower()
        if chunked and "eventlet.input" in environ:
            environ.setdefault("wsgi.input_terminated", True)
        return self.app(environ, start_response)
