"""Token batching for clients that ask for it: a busy stream's deltas in fewer messages.

docs/protocol.md §4 sends one `token` (or `thinking`) event per model delta, and every client gets
that unless it connects with `auth: {"batch_deltas": true}`. Such a client is put in the
conversation's second room, `CID/batched`. A delta that comes when the room sent none for
WINDOW_SECONDS goes to both rooms as it is (one message, so a stream at a model's pace is
neither delayed nor costlier); while deltas pour in faster, the batched room gets them
gathered every WINDOW_SECONDS as `deltas` events: `{of: "token"|"thinking", message_id,
first_seq, seq, texts: [...]}` (one text per delta, `first_seq + i` its seq; `agent`,
`parent_call_id`, `depth` as on the events). Any other event of the conversation sends
what was gathered first, so both rooms see one order. The page handles the ~12,000 socket
messages of a long answer in seconds of main-thread work; gathered, they are a few hundred.

It reaches no library's internals: it emits through the functions web.transport.install gives
it (python-socketio's own emit, and whether a room has clients, read there).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from protocol.events import Event, Thinking, Token

log = logging.getLogger(__name__)
WINDOW_SECONDS = 0.008
BATCHED_SUFFIX = "/batched"
SAME_BATCH = ("message_id", "agent", "parent_call_id", "depth")
DELTAS = (Token, Thinking)  # a tuple: `Token | Thinking` would build a union at every event

Emit = Callable[[str, dict[str, Any], "str | list[str]"], None]  # (name, payload, to)
Sleep = Callable[[float], None]


def _head(wire: dict[str, Any]) -> dict[str, Any]:
    """The fields a batch's deltas share (one batch per message and agent)."""
    return {key: wire[key] for key in SAME_BATCH if key in wire}


def batched_room(conversation_id: str) -> str:
    """The room of the conversation's clients that asked for gathered deltas."""
    return conversation_id + BATCHED_SUFFIX


@dataclass
class _Room:
    """One conversation's batched room: what is gathered and when it last sent."""

    name: str  # batched_room(conversation_id)
    lock: threading.Lock = field(default_factory=threading.Lock)
    kind: str = ""
    head: dict[str, Any] = field(default_factory=dict)  # the batch's shared fields
    first_seq: int = 0
    texts: list[str] = field(default_factory=list)
    last_sent: float = 0.0


class DeltaBatcher:
    """Sends each conversation event to both rooms, deltas gathered for the batched one."""

    def __init__(
        self,
        emit: Emit,
        sleep: Sleep,
        start: Callable[[Callable[[], None]], Any],
        wanted: Callable[[str], bool],
    ) -> None:
        """`wanted(room)`: whether a client may be in that batched room (else deltas are not
        gathered for it: a stream at a model's pace jitters into gathering often)."""
        self._emit = emit
        self._wanted = wanted
        self._sleep = sleep
        self._rooms: dict[str, _Room] = {}
        self._pending = threading.Event()  # some room gathers deltas
        self._closed = False
        self._start: Callable[[Callable[[], None]], Any] | None = start  # at the first batch

    def send(self, event: Event, wire: dict[str, Any]) -> None:
        cid = event.conversation_id
        if cid is None:
            self._emit(event.name, wire, None)  # type: ignore[arg-type]
            return
        room = self._room(cid)
        with room.lock:
            if isinstance(event, DELTAS) and event.seq is not None:
                self._delta(cid, room, event, wire)
                return
            self._send_gathered(cid, room)
            self._emit(event.name, wire, [cid, room.name])
        if event.name == "done" and event.depth is None:
            self._rooms.pop(cid, None)

    def close(self) -> None:
        self._closed = True
        self._pending.set()

    def _room(self, cid: str) -> _Room:
        # No lock to find it: a thread preempted while holding one would queue every stream
        # behind it. `get` and `setdefault` are each atomic; a race makes one _Room, kept.
        room = self._rooms.get(cid)
        return room if room is not None else self._rooms.setdefault(cid, _Room(batched_room(cid)))

    def _delta(self, cid: str, room: _Room, event: Event, wire: dict[str, Any]) -> None:
        if room.texts and (room.kind != event.name or room.head != _head(wire)):
            self._send_gathered(cid, room)
        if not room.texts and not self._wanted(room.name):
            self._emit(event.name, wire, cid)
            return
        now = time.monotonic()
        if not room.texts and now - room.last_sent >= WINDOW_SECONDS:
            room.last_sent = now  # a quiet room: the delta goes out as it is, to both rooms
            self._emit(event.name, wire, [cid, room.name])
            return
        self._emit(event.name, wire, cid)
        if not room.texts:
            room.kind, room.head, room.first_seq = event.name, _head(wire), event.seq or 0
        room.texts.append(wire["text"])
        if self._start is not None:
            start, self._start = self._start, None
            start(self._flush_loop)
        self._pending.set()

    def _send_gathered(self, cid: str, room: _Room) -> None:
        if not room.texts:
            return
        payload = {
            "conversation_id": cid,
            "of": room.kind,
            **room.head,
            "first_seq": room.first_seq,
            "seq": room.first_seq + len(room.texts) - 1,
            "texts": room.texts,
        }
        room.texts = []
        room.last_sent = time.monotonic()
        self._emit("deltas", payload, room.name)

    def _flush_loop(self) -> None:
        while not self._closed:
            self._pending.wait()
            self._pending.clear()
            self._sleep(WINDOW_SECONDS)
            rooms = list(self._rooms.items())  # one C call: atomic under the GIL
            for cid, room in rooms:
                with room.lock:
                    try:
                        self._send_gathered(cid, room)
                    except Exception:  # the next room's clients still get theirs
                        log.exception(
                            "gathered deltas could not be sent",
                            extra={"fields": {"conversation_id": cid}},
                        )
