"""The one shape of a received event (`Received`), kept by `EventLog`, which every recorder of
the kit is, so each waits and filters the same way:
- `tests.kit.clients.EventClient`: a Socket.IO client over the network (workspace_client's
  connection; `StockSocketIOClient`, python-socketio's, for the tests of transports);
- `tests.kit.clients.InProcessClient`: Flask-SocketIO's test client, in-process;
- `tests.kit.terminal.TerminalRecorder`: a `MainTerminal` run in-process, its events as it
  emits them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from tests.kit.waits import wait_until

T = TypeVar("T")


@dataclass
class Received:
    """One event as a test saw it arrive."""

    name: str
    payload: Any  # the event's argument: a dict for every event the server sends
    at: float  # time.monotonic() on arrival


class EventLog:
    """Events in arrival order, each a `Received`, with waits and filters over them.

    A recorder whose events are pushed calls `record` (from any thread); one that must fetch
    them overrides `fetch`, which every read and every wait calls first."""

    def __init__(self) -> None:
        self.events: list[Received] = []
        self._changed = threading.Condition()
        self._done_counts: dict[Any, int] = {}  # conversation id -> `done` events recorded

    def record(self, name: str, payload: Any = None) -> None:
        with self._changed:
            self._append(Received(name, payload, time.monotonic()))
            self._changed.notify_all()

    def _append(self, event: Received) -> None:
        """Keep an event (the lock held); a wait on a `done` then costs no scan of them all,
        which a stream of thousands of events would pay at every one."""
        self.events.append(event)
        if event.name == "done" and isinstance(event.payload, dict):
            cid = event.payload.get("conversation_id")
            self._done_counts[cid] = self._done_counts.get(cid, 0) + 1

    def fetch(self) -> None:
        """Bring in what arrived but is not recorded yet (nothing, for a pushed recorder)."""

    def received(self) -> list[Received]:
        """Every event so far, in arrival order."""
        with self._changed:
            self.fetch()
            return list(self.events)

    def clear(self) -> None:
        """Forget every event received so far."""
        with self._changed:
            self.fetch()
            self.events.clear()
            self._done_counts.clear()

    def wait_until(
        self,
        condition: Callable[[list[Received]], T | None],
        timeout: float = 10,
        what: str = "the events",
    ) -> T:
        """Block until `condition(events)` is truthy; return its value."""

        def check() -> T | None:
            self.fetch()
            return condition(self.events)

        return wait_until(check, timeout, what, woken_by=self._changed, details=self._last)

    def _last(self) -> str:
        shown = [
            (e.name, e.payload.get("seq")) if isinstance(e.payload, dict) else e.name
            for e in self.events[-20:]
        ]
        return f"the last events {shown}"

    def wait_for(self, event: str, /, timeout: float = 10, **match: Any) -> dict[str, Any]:
        """The payload of the first event called `event` whose payload holds `match`."""

        def first(events: list[Received]) -> dict[str, Any] | None:
            return next(iter(payloads(events, event, **match)), None)

        return self.wait_until(first, timeout, f"a {event} event with {match}")

    def named(self, event: str, /, **match: Any) -> list[dict[str, Any]]:
        """The payloads of the events called `event` (whose payload holds `match`), in order."""
        return payloads(self.received(), event, **match)

    def of(self, conversation_id: str) -> list[Received]:
        """The events of one conversation, in arrival order."""
        return [e for e in self.received() if _holds(e, {"conversation_id": conversation_id})]

    def dones(self, conversation_id: str) -> list[dict[str, Any]]:
        """The payloads of the conversation's `done` events so far."""
        return [e.payload for e in self.of(conversation_id) if e.name == "done"]

    def wait_done(
        self, conversation_id: str, timeout: float = 20, count: int = 1
    ) -> list[Received]:
        """Wait for the conversation's `count`-th `done`; return its events so far."""
        self.wait_until(
            lambda _: self._done_counts.get(conversation_id, 0) >= count,
            timeout,
            f"done #{count} of {conversation_id}",
        )
        return self.of(conversation_id)


def payloads(events: list[Received], event: str, /, **match: Any) -> list[dict[str, Any]]:
    """The payloads of the events called `event` whose payload holds `match`, in order."""
    return [e.payload for e in events if e.name == event and _holds(e, match)]


def tokens(events: list[Received]) -> list[Received]:
    """The token events among `events`."""
    return [e for e in events if e.name == "token"]


def text_of(events: list[Received]) -> str:
    """The text the token events among `events` carry."""
    return "".join(e.payload["text"] for e in tokens(events))


def _holds(event: Received, match: dict[str, Any]) -> bool:
    payload = event.payload
    return isinstance(payload, dict) and all(payload.get(k) == v for k, v in match.items())
