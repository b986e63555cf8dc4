"""One Socket.IO connection to a web workspace, over a WebSocket, with events in wire order.

The stock `python-socketio` client hands each event to a new thread: a fast stream is capped at a
few thousand events a second and its handlers may see them out of order. Here one reader thread
parses every frame and calls the handler itself, so the handler sees each event once, in the
order the server sent it; a slow handler slows the reader, never reorders it.

Engine.IO 4 / Socket.IO 5 over the `websocket` transport, the default namespace, text packets
only (the workspace sends no binary events): `0{open}` then `40{auth}` -> `40{sid}` or
`44{error}`; events `42[name, data]`; calls `42ID[name, data]` answered by `43ID[result]`; the
server's ping `2` answered with `3`.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import threading
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode, urlsplit, urlunsplit

import simple_websocket

EventHandler = Callable[[str, Any], None]
AckHandler = Callable[[Any], None]
RECEIVE_BYTES = 65536  # one read takes a burst of frames (the library's default is 4 KB)


class _WebSocket(simple_websocket.Client):
    def handshake(self) -> None:
        super().handshake()
        # Frames read along with the handshake answer would wait in wsproto for the next read,
        # and the server sends nothing more until it hears from us.
        self.connected = self._handle_events()


class ConnectionRefused(Exception):
    """The server refused the connection: `code` is its reason (`wrong_token`, ...)."""

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.code = code


class Disconnected(Exception):
    """The connection closed before a call was answered."""


class Connection:
    """A connected socket: `call` waits for an acknowledgement, `on_event` gets every event."""

    def __init__(
        self,
        url: str,
        *,
        auth: dict[str, Any] | None = None,
        on_event: EventHandler,
        on_close: Callable[[], None] | None = None,
        timeout: float = 10.0,
        headers: dict[str, str] | None = None,
    ) -> None:
        """`headers`: extra HTTP headers of the WebSocket handshake (an `Origin`, ...)."""
        self._on_event = on_event
        self._on_close = on_close
        self._ids = itertools.count(1)
        self._waiting: dict[int, tuple[threading.Event, list[Any]]] = {}
        self._callbacks: dict[int, AckHandler] = {}
        self._lock = threading.Lock()
        self._send_lock = threading.Lock()
        self._ws = _WebSocket(_socket_url(url), headers=headers, receive_bytes=RECEIVE_BYTES)
        self.connected = False
        try:
            opened = self._receive(timeout)
            if not opened.startswith("0"):
                raise ConnectionRefused(f"unexpected first packet {opened[:40]!r}")
            self._send("40" + (json.dumps(auth) if auth else ""))
            answer = self._receive(timeout)
            while answer == "2":  # a ping before the answer
                self._send("3")
                answer = self._receive(timeout)
            if answer.startswith("44"):
                error = json.loads(answer[2:] or "{}")
                data = error.get("data") if isinstance(error.get("data"), dict) else {}
                raise ConnectionRefused(str(error.get("message", "refused")), data.get("code"))
            if not answer.startswith("40"):
                raise ConnectionRefused(f"unexpected answer {answer[:40]!r}")
        except BaseException:
            self._ws.close()
            raise
        self.connected = True
        self._reader = threading.Thread(target=self._read, name="workspace-client", daemon=True)
        self._reader.start()

    def emit(self, name: str, data: Any = None, callback: AckHandler | None = None) -> None:
        """Send an event; `callback(ack)` gets its acknowledgement on the reader thread (never
        when the connection closes first)."""
        if callback is None:
            self._send("42" + json.dumps([name, data]))
            return
        number = next(self._ids)
        with self._lock:
            self._callbacks[number] = callback
        self._send(f"42{number}" + json.dumps([name, data]))

    def call(self, name: str, data: Any = None, timeout: float = 10.0) -> Any:
        """Emit `name` and wait for the server's acknowledgement: its first argument."""
        number = next(self._ids)
        answered, result = threading.Event(), list[Any]()
        with self._lock:
            if not self.connected:
                raise Disconnected(f"{name}: not connected")
            self._waiting[number] = (answered, result)
        try:
            self._send(f"42{number}" + json.dumps([name, data]))
            if not answered.wait(timeout):
                raise TimeoutError(f"{name}: no answer within {timeout:g} s")
        finally:
            with self._lock:
                self._waiting.pop(number, None)
        if not result:
            raise Disconnected(f"{name}: the connection closed before the answer")
        return result[0]

    def close(self, timeout: float = 2.0) -> None:
        """Leave (the server sees a Socket.IO disconnect, then the WebSocket's close) and wait
        up to `timeout` for the reader to end: after it, `connected` is False and `on_close`
        has run (unless called from a handler, on the reader thread itself)."""
        if self.connected:
            with contextlib.suppress(Disconnected):
                self._send("41")
        with contextlib.suppress(simple_websocket.ConnectionClosed, OSError):  # closed already
            self._ws.close()
        if threading.current_thread() is not self._reader:
            self._reader.join(timeout)

    def wait_closed(self, timeout: float | None = None) -> bool:
        self._reader.join(timeout)
        return not self._reader.is_alive()

    def _send(self, packet: str) -> None:
        try:
            with self._send_lock:
                self._ws.send(packet)
        except (simple_websocket.ConnectionClosed, OSError) as exc:
            raise Disconnected(f"the connection closed: {exc}") from exc

    def _receive(self, timeout: float) -> str:
        packet = self._ws.receive(timeout)
        if packet is None:
            raise TimeoutError(f"no answer from the server within {timeout:g} s")
        return packet if isinstance(packet, str) else packet.decode()

    def _read(self) -> None:
        try:
            while True:
                packet = self._ws.receive()
                if packet is None:
                    break
                self._packet(packet if isinstance(packet, str) else packet.decode())
        except (simple_websocket.ConnectionClosed, Disconnected):
            pass
        finally:
            self._closed()

    def _packet(self, packet: str) -> None:
        if packet.startswith("42"):
            body = packet[2:]
            name, *args = json.loads(body[body.index("[") :])
            self._on_event(name, args[0] if args else None)
        elif packet.startswith("43"):
            body = packet[2:]
            start = body.index("[")
            number = int(body[:start])
            with self._lock:
                waiting = self._waiting.get(number)
                callback = self._callbacks.pop(number, None)
            if callback is not None:
                callback((json.loads(body[start:]) or [None])[0])
            elif waiting is not None:
                waiting[1].extend(json.loads(body[start:]) or [None])
                waiting[0].set()
        elif packet == "2":
            self._send("3")
        elif packet.startswith(("41", "1")):
            self._ws.close()

    def _closed(self) -> None:
        with self._lock:
            self.connected = False
            waiting = list(self._waiting.values())
            self._callbacks.clear()
        for answered, _ in waiting:
            answered.set()
        if self._on_close is not None:
            self._on_close()


def _socket_url(url: str) -> str:
    parts = urlsplit(url)
    scheme = "wss" if parts.scheme in ("https", "wss") else "ws"
    query = urlencode({"EIO": "4", "transport": "websocket"})
    return urlunsplit((scheme, parts.netloc, "/socket.io/", query, ""))
