"""A conversation's one order of events and records.

Every event gets the conversation's next `seq`; every history record the `seq` of the last
event before it; both under one lock. So a history snapshot and the events after its seq
never overlap, and a reloading client renders the one, then applies only the other.

A task's end stores its last seq; events outside tasks (a background process's) reserve
SEQ_RESERVE seqs ahead in meta.json, so a server that restarts after them goes on past every
seq a page may have seen.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from history.conversation import Conversation
from protocol.events import Event
from protocol.records import MessageRecord, Role

log = logging.getLogger(__name__)

EventSink = Callable[[Event], None]
SEQ_RESERVE = 1000  # seqs meta.json reserves ahead of an event outside a task

_reported: dict[str, int] = {}  # conversation id: the last seq this server process gave


class Timeline:
    """Orders a conversation's events and records; hands each event to the front's sink."""

    def __init__(self, sink: EventSink) -> None:
        self.lock = threading.RLock()
        self.sink = sink
        self.conversation: Conversation | None = None
        self.seq = 0  # of the last event reported
        self._reserved = 0  # meta.json's seq_reserved

    def open(self, conversation: Conversation | None, seq: int) -> None:
        """Write to `conversation` (None: the next task creates one), whose last event was `seq`."""
        with self.lock:
            self.conversation = conversation
            self._reserved = 0
            if conversation is not None:
                self._reserved = _stored_reserve(conversation)
                # Another terminal of this process may have gone on past what is stored; a
                # process that gave none goes on past the reserve (a restart after events
                # outside a task, whose seqs were not stored).
                seq = max(seq, _reported.get(conversation.id, self._reserved))
            self.seq = seq

    def skip_to(self, seq: int) -> None:
        """Go on after `seq` (events another process sent that this one never saw)."""
        with self.lock:
            self.seq = max(self.seq, seq)

    def report(
        self,
        event: Event,
        *,
        before_send: Callable[[Event], None] | None = None,
        outside_task: bool = False,
    ) -> None:
        """Stamp the event with the conversation and the next seq, and send it; `before_send`
        sees it stamped, before anyone else does. An event `outside_task` has its seq
        reserved in meta.json first (no task end stores it)."""
        with self.lock:
            self.seq += 1
            conversation = self.conversation
            event.conversation_id = conversation.id if conversation is not None else None
            event.seq = self.seq
            if conversation is not None:
                _reported[conversation.id] = self.seq
                if outside_task and self.seq > self._reserved:
                    self._reserved = self.seq + SEQ_RESERVE
                    try:
                        conversation.update_meta(seq_reserved=self._reserved)
                    except OSError:  # kept in memory: the next save of meta.json writes it
                        log.warning("the seq reserve was not saved", exc_info=True)
            if before_send is not None:
                before_send(event)
            self.sink(event)

    def record(self, role: Role, content: str, **fields: Any) -> MessageRecord:
        """Append a history record stamped with the seq of the last event before it."""
        with self.lock:
            if self.conversation is None:
                raise RuntimeError("no conversation: begin a task first")
            return self.conversation.append(role, content, seq=self.seq, **fields)


def _stored_reserve(conversation: Conversation) -> int:
    """The seq meta.json reserved up to (0: none, or not a number)."""
    reserved = conversation.meta["meta"].get("seq_reserved", 0)
    return reserved if isinstance(reserved, int) else 0
