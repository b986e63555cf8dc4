"""The internals of what carries the bytes: simple-websocket's connection, Werkzeug's and
eventlet's servers, and the queue classes (eventlet's, the standard library's)."""

from __future__ import annotations

import base64
import contextlib
import inspect
import queue
import socket
import threading
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import simple_websocket
import werkzeug.serving
from wsproto import WSConnection
from wsproto.events import TextMessage

from tests.internals.kit import (
    BATCHED_WRITES,
    NODELAY,
    PATIENCE,
    PYTHON,
    QUEUE_CAP,
    Checks,
    parameters,
    same_code,
    wait_for,
)
from tests.kit.raw_socket import client_frame

internal = Checks()


# simple-websocket


def upgraded_pair() -> tuple[simple_websocket.Server, socket.socket]:
    """simple_websocket's server end of a WebSocket on a socket pair, as under Werkzeug; the
    other end, its handshake answer read."""
    server_end, client_end = socket.socketpair()
    client_end.settimeout(PATIENCE)
    environ = {
        "werkzeug.socket": server_end,
        "HTTP_HOST": "localhost",
        "HTTP_CONNECTION": "Upgrade",
        "HTTP_UPGRADE": "websocket",
        "HTTP_SEC_WEBSOCKET_KEY": base64.b64encode(b"k" * 16).decode(),
        "HTTP_SEC_WEBSOCKET_VERSION": "13",
    }
    connection = simple_websocket.Server(environ)
    answer = b""
    while b"\r\n\r\n" not in answer:
        answer += client_end.recv(4096)
    assert answer.startswith(b"HTTP/1.1 101"), answer
    return connection, client_end


class RecordingSocket:
    """Stands in for a connection's socket as web.transport.batched_writes does: records what
    is written with `send`; every other attribute is the socket's."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self.sent: list[bytes] = []

    def send(self, data: bytes) -> int:
        self.sent.append(bytes(data))
        return self._sock.send(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)


@internal(
    "simple-websocket",
    "simple_websocket.ws.Base.sock, ws and connected",
    BATCHED_WRITES,
    "`sock`, looked up at every write and written with send(bytes) only (a message, a close, "
    "the reader thread's answers), so a stand-in set there takes every write; `ws`, the "
    "wsproto connection framing each message; `connected`",
)
def check_connection_writes() -> None:
    connection, client_end = upgraded_pair()
    try:
        assert connection.connected and connection.mode == "werkzeug"
        assert isinstance(connection.ws, WSConnection), type(connection.ws)
        framed = connection.ws.send(TextMessage(data="framed"))
        assert isinstance(framed, bytes), type(framed)
        recording = RecordingSocket(connection.sock)
        connection.sock = recording
        connection.send("hello")
        assert len(recording.sent) == 1, "send did not write through `sock.send`"
        client_end.sendall(client_frame(0x9, b"ping"))  # the reader thread answers a pong
        wait_for(lambda: len(recording.sent) == 2, "the reader's pong went past `sock.send`")
        connection.close()
        assert len(recording.sent) == 3, "close did not write through `sock.send`"
    finally:
        client_end.close()
        connection.sock.close()
        connection.thread.join(PATIENCE)


@internal(
    "simple-websocket",
    "simple_websocket.Client.handshake and _handle_events",
    "workspace_client/connection.py",
    "handshake(), called by the constructor, read the server's answer into `ws`; "
    "_handle_events() handles what `ws` holds and says whether the connection goes on",
)
def check_client_handshake() -> None:
    assert "self.handshake()" in inspect.getsource(simple_websocket.ws.Base.__init__)
    assert parameters(simple_websocket.Client._handle_events) == ["self"]
    same_code(simple_websocket.Client.handshake, "771611a7593de280")


# Werkzeug


@contextlib.contextmanager
def werkzeug_serving(app: Callable[..., Any]) -> Iterator[tuple[str, int]]:
    """Werkzeug's development server (threading mode's) serving `app` on a free port."""
    server = werkzeug.serving.make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield "127.0.0.1", server.server_port
    finally:
        server.shutdown()
        thread.join(PATIENCE)
        server.server_close()


def request(address: tuple[str, int], path: str = "/", make: Any = socket) -> tuple[bytes, Any]:
    """A GET answered until the server closes; and the client's own address."""
    with make.create_connection(address, timeout=PATIENCE) as client:
        client.sendall(
            f"GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n".encode()
        )
        answer = b""
        while chunk := client.recv(65536):
            answer += chunk
        return answer, client.getsockname()


def noting_the_socket(key: str, seen: dict[str, Any]) -> Callable[..., list[bytes]]:
    """A WSGI app that notes the connection web.transport.tcp_nodelay would take."""

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        sock = environ[key] if key == "werkzeug.socket" else environ[key].get_socket()
        seen["nodelay"] = hasattr(sock, "setsockopt")
        seen["peer"] = sock.getpeername()
        start_response("200 OK", [("Content-Length", "2")])
        return [b"ok"]

    return app


@internal(
    "werkzeug",
    "werkzeug.serving's environ['werkzeug.socket']",
    f"{NODELAY}, {QUEUE_CAP}",
    "the development server putting the request's connection in the environ",
)
def check_werkzeug_socket() -> None:
    seen: dict[str, Any] = {}
    with werkzeug_serving(noting_the_socket("werkzeug.socket", seen)) as address:
        answer, client = request(address)
    assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
    assert seen["nodelay"] and seen["peer"] == client, seen


@internal(
    "werkzeug",
    "werkzeug.serving.WSGIRequestHandler.run_wsgi's errors",
    QUEUE_CAP,
    "an app's ConnectionError ending the request with nothing written, any other error with a "
    "500 written (after an upgrade: into the WebSocket stream)",
)
def check_werkzeug_errors() -> None:
    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        if environ["PATH_INFO"] == "/dropped":
            raise ConnectionError("the WebSocket ended")
        raise ValueError("a failure")

    with werkzeug_serving(app) as address:
        dropped, _ = request(address, "/dropped")
        failed, _ = request(address, "/failed")
    assert dropped == b"", f"a ConnectionError was answered: {dropped[:200]!r}"
    assert failed.startswith(b"HTTP/1.1 500"), f"another error was answered {failed[:200]!r}"


# eventlet


def green() -> Any:
    """eventlet, imported quietly (it says it is deprecated)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import eventlet
        import eventlet.green.socket
        import eventlet.queue
        import eventlet.wsgi
    return eventlet


def counting(base: type[Any], counts: dict[str, int]) -> type[Any]:
    """`base` counting what goes through its `_put` and `_get`, as counted_queue does."""

    class Counting(base):
        def _put(self, item: Any) -> None:
            counts["put"] += 1
            super()._put(item)

        def _get(self) -> Any:
            counts["get"] += 1
            return super()._get()

    return Counting


@internal(
    "eventlet",
    "eventlet.queue.Queue._put and _get",
    QUEUE_CAP,
    "every item stored through _put and taken through _get, a waiting getter's too; "
    "get(block, timeout)",
)
def check_eventlet_queue() -> None:
    eventlet = green()
    assert parameters(eventlet.queue.Queue.get) == ["self", "block", "timeout"]
    counts = {"put": 0, "get": 0}
    waiting = counting(eventlet.queue.Queue, counts)()
    got: list[Any] = []
    getter = eventlet.spawn(lambda: got.append(waiting.get()))
    eventlet.sleep(0)  # the getter waits on the empty queue
    waiting.put("waited for")
    with eventlet.Timeout(PATIENCE):
        getter.wait()
    waiting.put("queued")
    got.append(waiting.get(block=False))
    assert got == ["waited for", "queued"], got
    assert counts == {"put": 2, "get": 2}, f"items went past _put and _get: {counts}"


@internal(
    "eventlet",
    "eventlet.wsgi's environ['eventlet.input'].get_socket()",
    NODELAY,
    "eventlet's WSGI server putting its Input in the environ, whose get_socket() is the "
    "request's connection",
)
def check_eventlet_socket() -> None:
    eventlet = green()
    seen: dict[str, Any] = {}
    listener = eventlet.listen(("127.0.0.1", 0))
    server = eventlet.spawn(
        eventlet.wsgi.server, listener, noting_the_socket("eventlet.input", seen), log_output=False
    )
    try:
        with eventlet.Timeout(PATIENCE):
            answer, client = request(listener.getsockname(), make=eventlet.green.socket)
    finally:
        server.kill()
        listener.close()
    assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
    assert seen["nodelay"] and seen["peer"] == client, seen


# The standard library


@internal(
    PYTHON,
    "queue.Queue._put and _get",
    QUEUE_CAP,
    "every item stored through _put and taken through _get (under the queue's lock), a "
    "waiting getter's too; get(block, timeout)",
)
def check_stdlib_queue() -> None:
    assert parameters(queue.Queue.get) == ["self", "block", "timeout"]
    counts = {"put": 0, "get": 0}
    waiting = counting(queue.Queue, counts)()
    got: list[Any] = []
    getter = threading.Thread(target=lambda: got.append(waiting.get()), daemon=True)
    getter.start()
    waiting.put("waited for")
    getter.join(PATIENCE)
    waiting.put("queued")
    got.append(waiting.get(block=False))
    assert got == ["waited for", "queued"], got
    assert counts == {"put": 2, "get": 2}, f"items went past _put and _get: {counts}"
