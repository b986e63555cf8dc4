"""What the web server changes in its Socket.IO stack for speed, and the one place it is put in.

create_app (web_server.py) gives `init_app` SERVER_OPTIONS, then calls install(), which puts
in place, in this order:
- tcp_nodelay.NoDelay around the app: TCP_NODELAY on each WebSocket's connection;
- client_queue_cap.ClientQueueCap on the Engine.IO server: each client's queue counted and a
  client dropped past AGENT_CLIENT_QUEUE_MB; in threading mode a writer's batch of frames goes
  out in one socket write (batched_writes);
- delta_batcher.DeltaBatcher, which every event goes out through (Transport.send).
Transport.keeping_up (and clients_keeping_up) says whether a conversation's clients are near
enough to what was sent to them to be sent more of a flood: process and terminal output wait
for them (in the pipe or the PTY; then the process waits on its writes), so that a slow client
is paced, not dropped at the cap.
SERVER_OPTIONS holds the packet class (fast_packet: a cheaper test for binary data);
answers_first.AnswersFirst, held by web/handlers.py, changes nothing in the libraries.

All of it keeps to docs/protocol.md; the limits on what a client may send live outside
(web/payload_depth.py, web/access.py), so that no change here can loosen them. The queue cap
is a limit too: it is here as it is built into engineio's queues, and it does not lapse
silently (install fails on a server without them, tests/test_transport_internals.py on a
library that changed them).

Each module names the internals of the libraries it relies on and the versions it was
written against; requirements.txt pins those libraries exactly, and
tests/test_transport_internals.py says which internal changed, in which version, and which
module to review. This module relies on, of Flask-SocketIO 5.7.0, `SocketIO.server`
(python-socketio's Server once `init_app` made it, emitted through past Flask-SocketIO's
wrapper, which only sorts its arguments); of python-socketio 5.18.1, `Server.eio` and the
manager's `rooms` table (`rooms[namespace][room]`: the room's clients, by sid) and
`sid_from_eio_sid(eio_sid, namespace)`.
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Callable, Iterable
from typing import Any

from flask import Flask
from flask_socketio import SocketIO

from protocol.events import Event
from web.transport.client_queue_cap import ClientQueueCap
from web.transport.delta_batcher import DeltaBatcher, batched_room
from web.transport.fast_packet import FastPacket
from web.transport.tcp_nodelay import NoDelay

SERVER_OPTIONS: dict[str, Any] = {"serializer": FastPacket}  # for init_app
GREEN_YIELD_SECONDS = 0.005  # CPython's own thread switch interval
FLUSH_SECONDS = 1.0  # at shutdown, for the clients' queues to empty
BEHIND_BYTES = 1024 * 1024  # waiting for a client past which it is sent no more output


class Transport:
    """What install() put in place that the server sends through."""

    def __init__(
        self,
        batcher: DeltaBatcher,
        queue_cap: ClientQueueCap,
        sleep: Callable[[float], Any],
        rooms: Callable[[], dict[Any, dict[str, str]]],
    ) -> None:
        """`rooms()`: the manager's table of the namespace's rooms (sid to Engine.IO sid)."""
        self._batcher = batcher
        self._queue_cap = queue_cap
        self._rooms = rooms
        self._sleep = sleep
        self._green = queue_cap.eio.async_mode == "eventlet"
        self._yielded = time.monotonic()

    def send(self, event: Event) -> None:
        """Emit `event` to its conversation's rooms (to every client when it has none)."""
        self._batcher.send(event, event.to_wire())
        # Under eventlet an emit leaves when the sending task yields: a stream read at a
        # model's pace yields at every read; one pouring in must still let the writers run.
        if self._green and time.monotonic() - self._yielded > GREEN_YIELD_SECONDS:
            self._sleep(0)
            self._yielded = time.monotonic()

    def keeping_up(self, conversation_id: str) -> bool:
        """Whether no client of this process in the conversation's rooms has more than
        BEHIND_BYTES waiting to be sent to it. Other processes' clients (with Redis) are paced
        by nothing here: past their own process's cap they are dropped."""
        rooms = self._rooms()
        eio_sids = [*rooms.get(conversation_id, {}).values()]
        eio_sids += rooms.get(batched_room(conversation_id), {}).values()
        return self._within(eio_sids)

    def clients_keeping_up(self, sids: Iterable[str]) -> bool:
        """Whether none of these clients (of this process) is behind as keeping_up says."""
        everyone = self._rooms().get(None, {})
        return self._within([everyone.get(sid, "") for sid in sids])

    def _within(self, eio_sids: list[str]) -> bool:
        return not any([self._queue_cap.behind(eio_sid, BEHIND_BYTES) for eio_sid in eio_sids])

    def replay(self) -> contextlib.AbstractContextManager[None]:
        """Around what a `join`'s replay sends: asked for, so not held against the queue cap."""
        return self._queue_cap.replay()

    def close(self) -> None:
        """Stop gathering deltas and give the clients' writers a moment to send what they
        hold (at shutdown, before the process exits: the tasks' last events)."""
        self._batcher.close()
        self._queue_cap.wait_sent(FLUSH_SECONDS, self._sleep)


def install(
    socketio: SocketIO, app: Flask, *, client_queue_bytes: int, scaled_out: bool
) -> Transport:
    """Put the speed-ups in place on `app`, whose `init_app` was given SERVER_OPTIONS; before
    any middleware that must see a request first is wrapped around the app. `scaled_out`:
    other processes' clients share the rooms (AGENT_REDIS_URL)."""
    app.wsgi_app = NoDelay(app.wsgi_app)  # type: ignore[method-assign]
    server = socketio.server
    manager = server.manager
    queue_cap = ClientQueueCap(
        server.eio,
        client_queue_bytes,
        lambda eio_sid: manager.sid_from_eio_sid(eio_sid, "/") or eio_sid,
    )

    def in_room(room: str) -> bool:  # with Redis, clients of other processes may be in it
        # The manager's own room table: asked once per delta, get_participants copies the room.
        return scaled_out or bool(manager.rooms.get("/", {}).get(room))

    batcher = DeltaBatcher(
        functools.partial(server.emit, namespace="/"),
        socketio.sleep,
        socketio.start_background_task,
        in_room,
    )
    return Transport(batcher, queue_cap, socketio.sleep, lambda: manager.rooms.get("/", {}))
