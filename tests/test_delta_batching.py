"""DeltaBatcher (web/transport/delta_batcher.py): what each room gets, in which order; end to
end in tests/test_web_e2e.py (both async modes)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from protocol.events import Done, Event, Notice, Thinking, Token
from web.transport import delta_batcher
from web.transport.delta_batcher import WINDOW_SECONDS, DeltaBatcher

Sent = tuple[str, dict[str, Any], Any]


class Rooms:
    """The batcher's emits, its flush loop run by hand, and a clock of quiet spells."""

    def __init__(self, wanted: bool = True) -> None:
        self.sent: list[Sent] = []
        self.loop: Callable[[], None] | None = None
        self.batcher = DeltaBatcher(
            lambda name, payload, to: self.sent.append((name, payload, to)),
            self.sleep,
            self.start,
            lambda _: wanted,
        )
        self.seq = 0

    def start(self, loop: Callable[[], None]) -> None:
        self.loop = loop

    def sleep(self, _: float) -> None:
        self.batcher._closed = True  # the loop ends after this round

    def flush(self) -> None:
        """One round of the flush loop."""
        assert self.loop is not None
        self.batcher._pending.set()
        self.loop()
        self.batcher._closed = False

    def send(self, event: Event) -> None:
        self.seq += 1
        event.conversation_id, event.seq = "c1", self.seq
        self.batcher.send(event, event.to_wire())

    def to_batched(self) -> list[tuple[str, Any]]:
        return [
            (name, payload.get("texts", payload.get("text")))
            for name, payload, to in self.sent
            if to in ("c1/batched", ["c1", "c1/batched"])
        ]


class Clock:
    """delta_batcher's clock, moved by hand: whether a room is quiet never depends on how
    fast this machine runs the test."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


@pytest.fixture(autouse=True)
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    clock = Clock()
    monkeypatch.setattr(delta_batcher, "time", clock)
    return clock


@pytest.fixture
def rooms() -> Rooms:
    return Rooms()


def test_a_delta_after_a_quiet_spell_goes_to_both_rooms_as_it_is(
    rooms: Rooms, clock: Clock
) -> None:
    rooms.send(Token("m1", "a"))
    clock.now += WINDOW_SECONDS
    rooms.send(Token("m1", "b"))
    assert [(n, p["text"], to) for n, p, to in rooms.sent] == [
        ("token", "a", ["c1", "c1/batched"]),
        ("token", "b", ["c1", "c1/batched"]),
    ]


def test_pouring_deltas_are_gathered_and_any_other_event_flushes_them_first(rooms: Rooms) -> None:
    for text in "abcd":
        rooms.send(Token("m1", text))
    rooms.send(Notice("retry", "a note"))
    assert rooms.to_batched() == [("token", "a"), ("deltas", ["b", "c", "d"]), ("notice", None)]
    plain = [p.get("text") for n, p, to in rooms.sent if to == "c1" or to == ["c1", "c1/batched"]]
    assert plain == ["a", "b", "c", "d", None]  # the per-delta room misses nothing
    deltas = next(p for n, p, _ in rooms.sent if n == "deltas")
    assert (deltas["first_seq"], deltas["seq"], deltas["of"]) == (2, 4, "token")


def test_a_change_of_kind_or_agent_starts_a_new_batch(rooms: Rooms) -> None:
    rooms.send(Thinking("m1", "hm"))
    rooms.send(Thinking("m1", "m"))
    rooms.send(Token("m1", "x"))
    sub = Token("m1", "y")
    sub.agent, sub.parent_call_id, sub.depth = "coder", "call-1", 1
    rooms.send(sub)
    rooms.flush()
    assert rooms.to_batched() == [
        ("thinking", "hm"),
        ("deltas", ["m"]),
        ("deltas", ["x"]),
        ("deltas", ["y"]),
    ]
    kinds = [(p["of"], p.get("agent")) for n, p, _ in rooms.sent if n == "deltas"]
    assert kinds == [("thinking", None), ("token", None), ("token", "coder")]


def test_the_flush_loop_sends_what_a_busy_room_gathered(rooms: Rooms) -> None:
    rooms.send(Token("m1", "a"))
    rooms.send(Token("m1", "b"))
    assert rooms.to_batched() == [("token", "a")]
    rooms.flush()
    assert rooms.to_batched() == [("token", "a"), ("deltas", ["b"])]
    rooms.send(Done("complete"))
    assert rooms.to_batched()[-1] == ("done", None)


def test_no_batched_client_no_gathering() -> None:
    rooms = Rooms(wanted=False)
    for text in "abc":
        rooms.send(Token("m1", text))
    assert [(n, to) for n, _, to in rooms.sent] == [("token", "c1")] * 3
    assert rooms.loop is None  # no flush loop started
