"""web.transport.fast_packet: the server's packet tells binary data as python-socketio's own
does."""

from __future__ import annotations

from typing import Any

import pytest
from socketio.packet import Packet

from web.transport.fast_packet import FastPacket

PAYLOADS: list[Any] = [
    ["token", {"conversation_id": "c1", "seq": 7, "text": "hi", "agent": None, "depth": 1.5}],
    ["done", {"ok": True, "usage": {"input": 3, "output": [1, 2, {"x": "y"}]}}],
    ["file", {"name": "a.bin", "data": b"\x00\x01"}],
    ["file", {"parts": [{"chunk": bytearray(b"\x02")}]}],
    [b"raw"],
    [],
    {},
    "text",
    None,
    ["deep", {"a": [{"b": [{"c": b"!"}]}]}],
]


@pytest.mark.parametrize("data", PAYLOADS)
def test_the_binary_test_answers_as_the_stock_one(data: Any) -> None:
    assert FastPacket.data_is_binary(data) == Packet.data_is_binary(data)


def test_a_text_event_encodes_as_the_stock_packet() -> None:
    data = ["token", {"conversation_id": "c1", "seq": 7, "text": "h\u00e9llo"}]
    ours = FastPacket(2, data=data, namespace="/").encode()
    assert ours == Packet(2, data=data, namespace="/").encode()
    assert ours.startswith('2["token",{"conversation_id":"c1"')
