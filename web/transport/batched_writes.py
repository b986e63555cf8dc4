"""One socket write per batch of a client's messages, not one per message (threading mode).

python-engineio's writer takes every packet queued for a client at once (`Socket.poll`) and
sends them one by one: a WebSocket frame and a `send` system call each. While tokens pour in,
a batch holds many, and each call hands the interpreter to the other threads and takes it
back behind them. Here the frames of a batch are gathered and written with one `sendall`
when the writer next waits on its queue: the end of its batch.

The connection has a second writer: simple_websocket's reader thread answers a close or a
ping, and sends pings, on the same socket. A `sendall` that meets a full socket buffer is
several `send` calls, and bytes written between them would land inside a frame (the browser
then fails the connection: "Invalid frame header"). So every write on the connection goes
through `SharedWrites`, under one lock, after what was gathered before it: the bytes reach
the wire in the order they were framed.

Written against python-engineio 4.15.1 and simple-websocket 1.1.0, of which it relies on:
- engineio's threading driver, `engineio.async_drivers._websocket_wsgi.SimpleWebSocketWSGI`:
  the handler is given the driver itself, whose `ws` is then the connection's
  `simple_websocket.Server`, and whose `send`, `wait` and `close` the handler calls;
- simple_websocket's `Base.sock`, the connection's socket, looked up at every write and
  written with `send(bytes)` only (by `send`, `close`, the reader thread's pings and its
  answers in `_handle_events`), so the stand-in set there takes every write;
- `Base.ws`, the wsproto connection, whose `send(event)` returns the framed bytes and raises
  wsproto's LocalProtocolError once a close was answered, and `Base.connected`.
wsproto itself (~=1.3) is used through its public API.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from typing import Any

from wsproto.events import BytesMessage, TextMessage
from wsproto.utilities import LocalProtocolError


class SharedWrites:
    """Stands in for a simple_websocket connection's socket: its own writes (`send`) go out
    after what the engine.io writer gathered, under the lock the writer gathers under; every
    other attribute (`recv`, `close`, `fileno`, ...) is the socket's."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self.lock = threading.Lock()
        self.pending = bytearray()  # framed, not yet written
        self.broken: OSError | None = None

    def send(self, data: bytes) -> int:
        with self.lock:
            self.pending += data
            self.write()
            if self.broken is not None:
                raise self.broken
        return len(data)

    def write(self) -> None:
        """Write what is pending (the caller holds the lock); a failure is kept in `broken`."""
        if not self.pending:
            return
        try:
            if self.broken is None:
                self._sock.sendall(self.pending)
        except OSError as exc:
            self.broken = exc
        finally:
            self.pending.clear()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)


class BatchedSends:
    """Stands in for the async driver's WebSocket in engineio's handler (`send`, `wait`,
    `close`; every other attribute is the driver's). `flush` is what the client's queue calls
    before its writer waits.

    Sends before the upgrade is done (the probe's answer, which the client must get before it
    goes on) are written at once."""

    def __init__(self, driver: Any, upgraded: Callable[[], bool]) -> None:
        """`upgraded()`: the engine.io socket's writer runs on this connection (before, while
        the upgrade is probed, a poll's wait on the same queue must not start gathering)."""
        self._driver = driver  # engineio's SimpleWebSocketWSGI; `.ws`: simple_websocket.Server
        self._connection = driver.ws
        self._writes = SharedWrites(driver.ws.sock)
        driver.ws.sock = self._writes
        self._upgraded = upgraded
        self._gathering = False  # from the writer's first wait on

    def send(self, message: str | bytes) -> None:
        if not self._gathering:
            self._driver.send(message)
            return
        event = (
            BytesMessage(data=message) if isinstance(message, bytes) else TextMessage(data=message)
        )
        writes = self._writes
        with writes.lock:  # framed and queued in one step: the wire keeps the framing order
            if writes.broken is not None or not self._connection.connected:
                raise OSError("the connection is closed")
            try:
                writes.pending += self._connection.ws.send(event)
            except LocalProtocolError as exc:  # a close was answered meanwhile
                raise OSError("the connection is closed") from exc

    def flush(self) -> None:
        """Write what was gathered (the writer is about to wait on its queue); a failure
        makes the next `send` raise, which ends the writer."""
        with self._writes.lock:
            if not self._gathering:
                self._gathering = self._upgraded()
            self._writes.write()

    def wait(self) -> Any:
        return self._driver.wait()

    def close(self) -> None:
        self.flush()
        self._driver.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._driver, name)
