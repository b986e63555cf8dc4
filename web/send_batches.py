"""One socket write per batch of a client's messages, not one per message (threading mode).

python-engineio's writer takes every packet queued for a client at once (`Socket.poll`) and
sends them one by one: a WebSocket frame and a `send` system call each. While tokens pour in,
a batch holds many, and each call hands the interpreter to the other threads and takes it
back behind them. Here the frames of a batch are gathered and written with one `sendall`
when the writer next waits on its queue: the end of its batch. A writer that finds one packet
writes it at once, as before; frames keep their order.

Sends before the writer's first wait (the polling-to-WebSocket upgrade's probe answer, which
the client must get before it goes on) are written at once.
"""

from __future__ import annotations

import threading
from typing import Any

from wsproto.events import BytesMessage, TextMessage


class BatchedSends:
    """Stands in for the async driver's WebSocket in engineio's handler (`send`, `wait`,
    `close`; every other attribute is the driver's). `flush` is what the client's queue calls
    before its writer waits."""

    def __init__(self, driver: Any) -> None:
        self._driver = driver  # engineio's SimpleWebSocketWSGI; `.ws`: simple_websocket.Server
        self._pending = bytearray()
        self._gathering = False  # from the writer's first wait on
        self._broken: OSError | None = None
        self._lock = threading.Lock()  # the writer gathers, a drop may flush from elsewhere

    def send(self, message: str | bytes) -> None:
        if not self._gathering:
            self._driver.send(message)
            return
        connection = self._driver.ws
        if self._broken is not None or not connection.connected:
            raise OSError("the connection is closed")
        event = (
            BytesMessage(data=message) if isinstance(message, bytes) else TextMessage(data=message)
        )
        with self._lock:
            self._pending += connection.ws.send(event)

    def flush(self) -> None:
        """Write what was gathered (the writer is about to wait on its queue)."""
        with self._lock:
            self._gathering = True
            if not self._pending or self._broken is not None:
                return
            try:
                self._driver.ws.sock.sendall(self._pending)
            except OSError as exc:  # the next send says so, and the writer ends
                self._broken = exc
            finally:
                self._pending.clear()

    def wait(self) -> Any:
        return self._driver.wait()

    def close(self) -> None:
        self.flush()
        self._driver.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._driver, name)
