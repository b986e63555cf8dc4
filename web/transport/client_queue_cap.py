"""A cap on what the server holds for one client: the messages waiting to be sent to it.

python-engineio puts every packet for a client in that client's queue (`Socket.queue`), and a
writer task takes them off and sends them on the WebSocket. A client that reads nothing (but
answers pings) stalls its writer once the kernel's buffers are full, and its queue then grows
with every event: megabytes over a long answer. Here each queue counts the bytes it holds;
past the cap (AGENT_CLIENT_QUEUE_MB) it takes no more and the client is dropped: the
connection closed, its TCP socket shut down so that the stalled writer wakes and ends. The
client reconnects and `join`s with its last seq for exactly the rest (docs/protocol.md §4).
`behind` tells a client that lags (what is paced to it asks), and drops one that took nothing
of its queue for STALL_SECONDS.

Written against python-engineio 4.15.1, of which it relies on:
- `Server._async`, the async mode's table: `create_queue()` makes each Socket's queue of its
  "queue" class, and `Socket._upgrade_websocket` calls its "websocket" class as
  `cls(handler, server)(environ, start_response)`; both are replaced, on this server only;
- `Socket._websocket_handler(ws)`, the handler given to that class: a bound method (its
  `__self__` the Socket) whose writer takes packets with `Socket.poll` (one blocking `get`,
  then `get(block=False)` until none is left) and sends each with `ws.send`, and ends on a
  None in the queue;
- `Socket.queue`, `.sid`, `.upgraded`, `.upgrading`, `.closed` and `.close(wait, abort, reason)`;
  `Server.sockets`, `.async_mode`, `.start_background_task`, `.reason.SERVER_DISCONNECT`;
- a queued packet's `data`: a Socket.IO packet's text, an ack's beginning with "3" or "6".
Of the queue classes (the standard library's queue.Queue; eventlet 0.41.3's Queue): every
item is stored and taken through `_put` and `_get`, and `empty()` says whether any is left
(waited on at shutdown). Of Werkzeug 3.1.9 (threading mode): an
error raised out of an upgraded request is answered with a 500 written into the WebSocket
stream, a ConnectionError with nothing (engineio's SimpleWebSocketWSGI raises one at its end).
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

from engineio import Server as EngineServer

from web.transport.batched_writes import BatchedSends
from web.transport.tcp_nodelay import connection_socket

log = logging.getLogger(__name__)
OTHER_PACKET_BYTES = 64  # an open packet's dict, a bare ping: small, not worth measuring
ACK_TYPES = ("3", "6")
SENT_POLL_SECONDS = 0.01
STALL_SECONDS = 15.0  # a client behind that takes nothing for this long is dropped


SIZED = (str, bytes, bytearray)  # a tuple: `str | bytes` would build a union at every call


def counted_queue(base: type[Any], cap: ClientQueueCap) -> type[Any]:
    """The async mode's queue class (queue.Queue, eventlet's Queue) counting what it holds.

    Both classes store and take items through `_put` and `_get` only, under their own lock.
    What the client asked for (an ack: a `get_conversation` may be megabytes; a `join`'s
    replay) is not held against the cap: `asked` counts it, and as the queue is FIFO the
    bytes that leave are taken off it first (so it never counts more than is left of it).
    """

    local = cap.local

    class CountedQueue(base):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.queued_bytes = 0
            self.asked = 0
            self.full = False  # past the cap: it takes nothing but the writer's end mark
            self.stalled: tuple[float, int] | None = None  # (since, least waiting): behind()
            self.sizes: deque[int] = deque()  # of the items held, in their order
            self.before_wait: Callable[[], None] | None = None  # batched_writes: a flush

        def get(self, block: bool = True, timeout: float | None = None) -> Any:
            if block and self.before_wait is not None:  # the writer's batch ends here
                self.before_wait()
            return super().get(block, timeout)

        def _put(self, item: Any) -> None:  # under the queue's lock
            if item is None:  # the writer's end mark
                self.sizes.append(0)
                super()._put(item)
                return
            if self.full:  # past the cap: dropped (a getter woken finds nothing and waits)
                return
            data = item.data  # its size on the wire, roughly (text counted in characters):
            size = len(data) if isinstance(data, SIZED) else OTHER_PACKET_BYTES
            self.queued_bytes += size
            if (type(data) is str and data[:1] in ACK_TYPES) or getattr(local, "replaying", False):
                self.asked += size  # an ack, or a join's replay: asked for
            self.sizes.append(size)
            super()._put(item)
            if self.queued_bytes - self.asked > cap.cap_bytes:
                self.full = True
                cap.full(self)

        def _get(self) -> Any:
            size = self.sizes.popleft()
            self.queued_bytes -= size
            self.asked = max(0, self.asked - size)
            return super()._get()

    return CountedQueue


class ClientQueueCap:
    """Installed on the Engine.IO server: counted queues, and the sockets to shut down."""

    def __init__(self, eio: EngineServer, cap_bytes: int, sid_of: Callable[[str], str]) -> None:
        """`sid_of(eio_sid)`: the client's Socket.IO sid, as the rest of the server names it."""
        self.eio, self.cap_bytes, self.sid_of = eio, cap_bytes, sid_of
        self._connections: dict[str, socket.socket] = {}  # by Engine.IO sid, while upgraded
        self.local = threading.local()  # `replaying`, per thread (green under eventlet: per task)
        modes = getattr(eio, "_async", None)
        if not isinstance(modes, dict) or not {"queue", "websocket"} <= modes.keys():
            raise RuntimeError(
                "python-engineio's Server._async is not the table of the queue and WebSocket "
                "classes this server replaces: install the version requirements.txt pins"
            )
        self._websocket_class = modes["websocket"]
        queue_class = counted_queue(modes["queue"], self)
        eio._async = {**modes, "queue": queue_class, "websocket": self._websocket}

    @contextlib.contextmanager
    def replay(self) -> Iterator[None]:
        """What this task sends in the block is a `join`'s replay: asked for (counted_queue)."""
        self.local.replaying = True
        try:
            yield
        finally:
            self.local.replaying = False

    def wait_sent(self, seconds: float, sleep: Callable[[float], Any]) -> None:
        """Until every connected client's writer took all its queue held, or for `seconds` at
        most (a closed connection's queue keeps its writer's end mark: nothing waits there)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and any(
            not (engine_socket.closed or engine_socket.queue.empty())
            for engine_socket in list(self.eio.sockets.values())
        ):
            sleep(SENT_POLL_SECONDS)

    def behind(self, eio_sid: str, limit: int) -> bool:
        """Whether more than `limit` bytes wait in that client's queue (never for one not
        connected here). One that took none of them for STALL_SECONDS is dropped instead, as
        at the cap: what waits for it must not wait on a client that reads nothing."""
        engine_socket = self.eio.sockets.get(eio_sid)
        queue = getattr(engine_socket, "queue", None)
        waiting = int(getattr(queue, "queued_bytes", 0))
        if queue is None or queue.full:
            return False
        if waiting <= limit:
            queue.stalled = None
            return False
        now = time.monotonic()
        since, least = queue.stalled or (now, waiting)
        if waiting < least:  # it took some since
            since, least = now, waiting
        queue.stalled = (since, least)
        if now - since < STALL_SECONDS:
            return True
        queue.full = True  # as at the cap: it takes no more, and is dropped once
        why = f"client dropped: it took nothing of what waited for it for {STALL_SECONDS:g} s"
        self.eio.start_background_task(self._drop, engine_socket, waiting, why)
        return False

    def full(self, queue: Any) -> None:
        """Drop the client whose queue passed the cap (called once per queue)."""
        held = next((s for s in list(self.eio.sockets.values()) if s.queue is queue), None)
        if held is not None:  # closing runs the disconnect handlers: not on the sender's time
            why = "client dropped: more waited to be sent to it than AGENT_CLIENT_QUEUE_MB allows"
            self.eio.start_background_task(self._drop, held, queue.queued_bytes, why)

    def _websocket(self, handler: Callable[[Any], Any], server: EngineServer) -> Any:
        """The async mode's WebSocket app for one connection, its socket noted by sid; in
        threading mode its writer's batches go out in one write each (batched_writes)."""
        engine_socket = handler.__self__  # type: ignore[attr-defined]  # Socket._websocket_handler
        sid = engine_socket.sid
        if self.eio.async_mode != "threading":
            app = self._websocket_class(handler, server)
        else:

            def upgraded() -> bool:  # the writer runs from then on (not a poll's wait)
                return bool(engine_socket.upgraded and not engine_socket.upgrading)

            def batched(driver: Any) -> Any:
                sends = BatchedSends(driver, upgraded)
                engine_socket.queue.before_wait = sends.flush
                try:
                    return handler(sends)
                except ConnectionError:
                    raise
                except Exception as exc:
                    # Werkzeug answers an error with a 500 response, written after the 101 into
                    # the WebSocket stream (the browser: "Invalid frame header"); it answers a
                    # ConnectionError with nothing. A send the client's close made fail (the
                    # upgrade probe's answer) ends here; any other error is logged.
                    if not isinstance(exc, OSError):
                        log.warning("a WebSocket ended on an error", exc_info=True)
                    raise ConnectionError("the WebSocket ended") from exc

            app = self._websocket_class(batched, server)

        def run(environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
            connection = connection_socket(environ)
            if connection is not None:
                self._connections[sid] = connection
            try:
                return app(environ, start_response)
            finally:
                self._connections.pop(sid, None)

        return run

    def _drop(self, held: Any, queued: int, why: str) -> None:
        log.warning(
            why,
            extra={
                "fields": {
                    "sid": self.sid_of(held.sid),
                    "eio_sid": held.sid,
                    "queued_bytes": queued,
                    "cap_bytes": self.cap_bytes,
                }
            },
        )
        held.close(wait=False, abort=True, reason=self.eio.reason.SERVER_DISCONNECT)
        connection = self._connections.get(held.sid)
        if connection is not None:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
