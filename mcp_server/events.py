"""The SSE events of MCP over HTTP kept for resumability: a client whose stream broke reconnects
(GET with `Last-Event-ID`) and is sent what that stream carried after the event it names.

One store per server, at most MAX_BYTES of messages in all (one resource read can be ~700 KB
of base64), the oldest event dropped first; a session's events are forgotten when the session
ends. The SDK's stream IDs are per session (request IDs, the standalone stream's key), so each
session stores and replays through its own view (`for_session`): a client replays only its own
session's events.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from dataclasses import dataclass

from mcp.server.streamable_http import (
    EventCallback,
    EventId,
    EventMessage,
    EventStore,
    StreamId,
)
from mcp_types import JSONRPCMessage

MAX_BYTES = 16 * 1024 * 1024
RETRY_MILLISECONDS = (
    2_000  # the `retry` the priming events suggest to a client that lost its stream
)


@dataclass(frozen=True)
class _Event:
    number: int
    session_id: str
    stream_id: StreamId
    message: JSONRPCMessage | None  # None: a priming event (a cursor, sent with no data)
    size: int


class EventLog:
    """Every session's events, in the order they were stored, bounded by bytes."""

    def __init__(self, max_bytes: int = MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0
        self._events: OrderedDict[int, _Event] = OrderedDict()
        self._streams: dict[tuple[str, StreamId], deque[_Event]] = {}
        self._next = 1

    def for_session(self, session_id: str) -> SessionEvents:
        return SessionEvents(self, session_id)

    def store(self, session_id: str, stream_id: StreamId, message: JSONRPCMessage | None) -> int:
        size = 0 if message is None else len(message.model_dump_json(by_alias=True))
        event = _Event(self._next, session_id, stream_id, message, size)
        self._next += 1
        self._events[event.number] = event
        self._streams.setdefault((session_id, stream_id), deque()).append(event)
        self.bytes += size
        while self.bytes > self.max_bytes and self._events:
            self._drop(next(iter(self._events.values())))
        return event.number

    def after(self, session_id: str, number: int) -> tuple[StreamId, list[_Event]] | None:
        """The stream of the session's event `number` and its events stored after it; None
        when there is no such event (another session's, or already dropped)."""
        event = self._events.get(number)
        if event is None or event.session_id != session_id:
            return None
        stream = self._streams[(session_id, event.stream_id)]
        return event.stream_id, [later for later in stream if later.number > number]

    def forget(self, session_id: str) -> None:
        for key in [key for key in self._streams if key[0] == session_id]:
            for event in self._streams.pop(key):
                self._events.pop(event.number, None)
                self.bytes -= event.size

    def _drop(self, event: _Event) -> None:
        del self._events[event.number]
        self.bytes -= event.size
        key = (event.session_id, event.stream_id)
        stream = self._streams[key]
        stream.popleft()  # stored in order: a stream's oldest is the log's oldest of it
        if not stream:
            del self._streams[key]


class SessionEvents(EventStore):
    """One session's view of the log, as the SDK's transport of that session uses it."""

    def __init__(self, log: EventLog, session_id: str) -> None:
        self.log = log
        self.session_id = session_id

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> EventId:
        return str(self.log.store(self.session_id, stream_id, message))

    async def replay_events_after(
        self, last_event_id: EventId, send_callback: EventCallback
    ) -> StreamId | None:
        if not last_event_id.isdigit():
            return None
        found = self.log.after(self.session_id, int(last_event_id))
        if found is None:
            return None
        stream_id, events = found
        for event in events:
            if event.message is not None:
                await send_callback(EventMessage(event.message, str(event.number)))
        return stream_id
