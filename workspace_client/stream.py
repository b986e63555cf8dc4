"""The conversations a `Client` follows: each event delivered once and in `seq` order, the
rejoin after a reconnect (or a cluster's `events_lost`), and the reload when the gap cannot be
replayed. `Client` owns the connection; this owns what travels on it."""

from __future__ import annotations

import contextlib
import threading
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

from protocol.events import (
    Done,
    Error,
    Event,
    Notice,
    ToolEvent,
    done_from_wire,
    expand_deltas,
    parse_event,
)
from workspace_client.connection import Disconnected

Handler = Callable[[Event], None]
Call = Callable[[str, dict[str, Any]], dict[str, Any]]
GAP_NOTICES = ("events_lost",)  # §13: the relay lost events; join again after the last seq


@dataclass
class Reloaded(Event):
    """The client's own event: the server could not replay what the connection missed (it
    restarted, or the task's log had moved on). `messages` are the conversation's records as
    get_conversation gave them after the reconnect, `running` whether a task still runs. A
    top-level `Done` follows when the task this client followed has ended."""

    name: ClassVar[str] = "reloaded"
    messages: list[dict[str, Any]] = field(default_factory=list)
    running: bool = False


@dataclass
class Followed:
    """A conversation whose events this client receives (it sent to it or joined it)."""

    conversation_id: str
    last_seq: int = 0  # the newest seq delivered
    buffering: bool = True  # keep events for `events()`
    buffer: deque[Event] = field(default_factory=deque)
    handlers: list[Handler] = field(default_factory=list)
    task_open: bool = False  # a task began here and its top-level Done was not delivered
    rejoining: bool = False  # hold events until the rejoin's answer has been dealt with
    held: list[Event] = field(default_factory=list)
    unanswered: dict[str, ToolEvent] = field(default_factory=dict)  # approvals whose answer
    # never reached the server (the connection dropped), by call id


class Stream:
    """Routes the wire's events to iterators and handlers; `call` is the client's op."""

    def __init__(self, call: Call, offer_approval: Callable[[ToolEvent], None] | None) -> None:
        self._call = call
        self._offer_approval = offer_approval
        self._followed: dict[str, Followed] = {}
        self._changed = threading.Condition(threading.RLock())  # the state above; deliveries
        self._global_handlers: list[Handler] = []
        self.failure: BaseException | None = None
        self.closing = False

    def begin(self, conversation_id: str) -> None:
        """A task is being sent to the conversation: keep its events for `events()`."""
        with self._changed:
            followed = self._followed.setdefault(conversation_id, Followed(conversation_id))
            followed.buffering = True
            followed.task_open = True

    def events(self, conversation_id: str) -> Iterator[Event]:
        with self._changed:
            followed = self._followed.get(conversation_id)
        if followed is None:
            followed = self.follow(conversation_id)
        with self._changed:
            followed.buffering = True
        try:
            while True:
                with self._changed:
                    while not followed.buffer:
                        if self.failure is not None:
                            raise self.failure
                        if self.closing:
                            raise Disconnected("the client was closed")
                        self._changed.wait()
                    event = followed.buffer.popleft()
                yield event
                if isinstance(event, Done) and event.depth is None:
                    return
        finally:
            with self._changed:
                followed.buffering = bool(followed.buffer)  # what came after: the next task's

    def follow(self, conversation_id: str, after_seq: int = 0) -> Followed:
        with self._changed:
            followed = self._followed.setdefault(conversation_id, Followed(conversation_id))
            followed.last_seq = max(followed.last_seq, after_seq)
        self.rejoin(followed)
        return followed

    def subscribe(self, conversation_id: str | None, handler: Handler) -> Callable[[], None]:
        if conversation_id is None:
            with self._changed:
                self._global_handlers.append(handler)
            return lambda: self._remove(self._global_handlers, handler)
        with self._changed:
            followed = self._followed.get(conversation_id)
            if followed is not None:
                followed.handlers.append(handler)
        if followed is None:
            followed = Followed(conversation_id, buffering=False, handlers=[handler])
            with self._changed:
                self._followed[conversation_id] = followed
            self.rejoin(followed)
        return lambda: self._remove(followed.handlers, handler)

    def fail(self, failure: BaseException) -> None:
        with self._changed:
            self.failure = failure
            self._changed.notify_all()

    def close(self) -> None:
        with self._changed:
            self.closing = True
            self._changed.notify_all()

    def not_answered(self, event: ToolEvent) -> None:
        """An approval's answer did not reach the server: the next rejoin asks for the call
        again and offers it anew while the server still waits for it."""
        with self._changed:
            followed = self._followed.get(event.conversation_id or "")
            if followed is not None:
                followed.unanswered[event.call_id] = event

    def rejoin_all(self) -> None:
        with self._changed:
            followed = list(self._followed.values())
        for conversation in followed:
            with contextlib.suppress(Disconnected, TimeoutError):  # the next reconnect retries
                self.rejoin(conversation)

    def rejoin(self, followed: Followed) -> None:
        """`join` after the last seq delivered (before an unanswered approval, so that the
        server replays it if it still waits); events meanwhile are held, then delivered in seq
        order after what the answer called for (a reload when the gap cannot be replayed)."""
        with self._changed:
            followed.rejoining = True
            after = min(
                [followed.last_seq] + [(e.seq or 1) - 1 for e in followed.unanswered.values()]
            )
        try:
            ack = self._call(
                "join", {"conversation_id": followed.conversation_id, "after_seq": after}
            )
            reload = ack["last_seq"] < after or ack["replays_after"] > after
            conversation = (
                self._call("get_conversation", {"conversation_id": followed.conversation_id})
                if reload
                else None
            )
        finally:
            with self._changed:
                followed.rejoining = False
                held, followed.held = followed.held, []
        with self._changed:
            reoffer = _still_waiting(followed.unanswered, held)
            followed.unanswered.clear()
            if conversation is not None:
                followed.last_seq = int(ack["last_seq"])
                for event in _reload_events(followed, conversation):
                    self._deliver(followed, event)
            for event in sorted(held, key=lambda e: e.seq or 0):
                self._deliver(followed, event)
        if self._offer_approval is not None:
            for approval in reoffer:
                self._offer_approval(approval)

    def on_wire(self, name: str, payload: Any) -> None:
        """The connection's event handler (on its reader thread)."""
        if name == "deltas" and isinstance(payload, dict):
            events = expand_deltas(payload)
        else:
            events = [parse_event(name, payload)]
        for event in events:
            self._route(event)

    def _route(self, event: Event) -> None:
        cid = event.conversation_id
        with self._changed:
            if cid is None:
                for handler in self._global_handlers:
                    handler(event)
                return
            followed = self._followed.get(cid)
            if followed is None:  # a conversation `send` started, before its ack came
                followed = self._followed[cid] = Followed(cid)
            if followed.rejoining:
                followed.held.append(event)
                return
            self._deliver(followed, event)
            if not (isinstance(event, Notice) and event.code in GAP_NOTICES):
                return
            followed.rejoining = True  # what comes next waits for the gap to be filled
        # the rejoin's ops are answered on this (the reader's) thread: not here
        threading.Thread(
            target=self.rejoin_quietly, args=(cid,), name="workspace-rejoin", daemon=True
        ).start()

    def rejoin_quietly(self, conversation_id: str) -> None:
        """Rejoin a followed conversation; when the connection fails, a reconnect rejoins it."""
        with self._changed:
            followed = self._followed.get(conversation_id)
        if followed is not None:
            with contextlib.suppress(Disconnected, TimeoutError):
                self.rejoin(followed)

    def _deliver(self, followed: Followed, event: Event) -> None:
        """Called with `_changed` held: the one place events reach iterators and handlers."""
        if event.seq is not None:
            if event.seq <= followed.last_seq:
                return  # seen already (a replay overlapping what came live)
            followed.last_seq = event.seq
        top_done = isinstance(event, Done) and event.depth is None
        followed.task_open = not top_done and (followed.task_open or event.seq is not None)
        if followed.buffering:
            followed.buffer.append(event)
            self._changed.notify_all()
        for handler in followed.handlers:
            handler(event)
        if (
            self._offer_approval is not None
            and isinstance(event, ToolEvent)
            and event.phase == "approval"
        ):
            self._offer_approval(event)

    def _remove(self, handlers: list[Handler], handler: Handler) -> None:
        with self._changed, contextlib.suppress(ValueError):
            handlers.remove(handler)


def _still_waiting(unanswered: dict[str, ToolEvent], replayed: list[Event]) -> list[ToolEvent]:
    """The unanswered approvals the rejoin's replay sent again with no answer after them: the
    server still waits for those (a call answered meanwhile shows its `result`)."""
    asked = {e.call_id for e in replayed if isinstance(e, ToolEvent) and e.phase == "approval"}
    if any(isinstance(e, Done) and e.depth is None for e in replayed):
        return []  # the task ended
    ended = {e.call_id for e in replayed if isinstance(e, ToolEvent) and e.phase == "result"}
    return [e for call_id, e in unanswered.items() if call_id in asked - ended]


def _reload_events(followed: Followed, conversation: dict[str, Any]) -> list[Event]:
    """What a reload tells a follower: the records, then the followed task's end if it has one."""
    cid = followed.conversation_id
    running = bool(conversation.get("running"))
    events: list[Event] = [
        Reloaded(conversation_id=cid, messages=conversation["messages"], running=running)
    ]
    if running or not followed.task_open:
        return events
    newest = next((r for r in reversed(conversation["messages"]) if r["role"] == "user"), None)
    ends = (conversation.get("conversation") or {}).get("meta", {}).get("task_ends") or {}
    end = ends.get(newest["id"]) if newest is not None else None
    if end is not None:
        events.append(done_from_wire({**end, "conversation_id": cid}))
    else:  # the server died before it could keep the task's end
        message = "The server stopped while the task ran; its end was not recorded."
        events.append(Error(code="interrupted", message=message, conversation_id=cid))
        events.append(Done(reason="interrupted", conversation_id=cid))
    return events
