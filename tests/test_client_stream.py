"""workspace_client.stream without a server: a cluster's `events_lost` notice (docs/protocol.md
§13) makes the client join again after the last seq it delivered, and the gap is filled."""

from __future__ import annotations

from typing import Any

from protocol.events import Notice, Token
from workspace_client.stream import Stream


def token(seq: int) -> dict[str, Any]:
    return {"conversation_id": "c1", "seq": seq, "message_id": "m1", "text": str(seq)}


def test_events_lost_rejoins_after_the_last_seq_and_fills_the_gap() -> None:
    joins: list[dict[str, Any]] = []

    def call(op: str, payload: dict[str, Any]) -> dict[str, Any]:
        assert op == "join"
        joins.append(payload)
        for seq in (3, 4):  # the replay, before the ack (one process)
            stream.on_wire("token", token(seq))
        return {"ok": True, "last_seq": 5, "replays_after": 0}

    stream = Stream(call, None)
    stream.begin("c1")
    events = stream.events("c1")
    for seq in (1, 2):
        stream.on_wire("token", token(seq))
    lost = {"conversation_id": "c1", "code": "events_lost", "message": "events were lost"}
    stream.on_wire("notice", lost)
    stream.on_wire("token", token(5))  # live; held while the rejoin runs, or after it
    got = [next(events) for _ in range(6)]
    assert joins == [{"conversation_id": "c1", "after_seq": 2}]
    assert isinstance(got[2], Notice) and got[2].code == "events_lost"
    assert [e.seq for e in got if isinstance(e, Token)] == [1, 2, 3, 4, 5]
