"""A conversation's one order of events and records.

Every event gets the conversation's next `seq`; every history record the `seq` of the last
event before it; both under one lock. So a history snapshot and the events after its seq
never overlap, and a reloading client renders the one, then applies only the other.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from history.conversation import Conversation
from protocol.events import Event
from protocol.records import MessageRecord, Role

EventSink = Callable[[Event], None]


class Timeline:
    """Orders a conversation's events and records; hands each event to the front's sink."""

    def __init__(self, sink: EventSink) -> None:
        self.lock = threading.RLock()
        self.sink = sink
        self.conversation: Conversation | None = None
        self.seq = 0  # of the last event reported

    def open(self, conversation: Conversation | None, seq: int) -> None:
        """Write to `conversation` (None: the next task creates one), whose last event was `seq`."""
        with self.lock:
            self.conversation = conversation
            self.seq = seq

    def skip_to(self, seq: int) -> None:
        """Go on after `seq` (events another process sent that this one never saw)."""
        with self.lock:
            self.seq = max(self.seq, seq)

    def report(self, event: Event, *, before_send: Callable[[Event], None] | None = None) -> None:
        """Stamp the event with the conversation and the next seq, and send it; `before_send`
        sees it stamped, before anyone else does."""
        with self.lock:
            self.seq += 1
            event.conversation_id = self.conversation.id if self.conversation is not None else None
            event.seq = self.seq
            if before_send is not None:
                before_send(event)
            self.sink(event)

    def record(self, role: Role, content: str, **fields: Any) -> MessageRecord:
        """Append a history record stamped with the seq of the last event before it."""
        with self.lock:
            if self.conversation is None:
                raise RuntimeError("no conversation: begin a task first")
            return self.conversation.append(role, content, seq=self.seq, **fields)
