"""The real server process's rooms, reconnection, access and restart, in both async modes."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest
import socketio
import websocket

from tests.fake_llm import FakeLLM, RecordedRequest, Reply, Response
from tests.kit.clients import EventClient, StockSocketIOClient, assert_contiguous, connected
from tests.kit.events import text_of, tokens
from tests.kit.server import ServerProcess
from tests.kit.waits import wait_until

MODES = ["threading", "eventlet"]
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.usefixtures("clean_fake"),
    pytest.mark.server(modes=MODES),
]


# --- rooms and reconnection ------------------------------------------------------------


def test_reconnect_and_join_gets_exactly_the_missed_events(server: ServerProcess, fake: FakeLLM):
    text = "".join(str(i % 10) for i in range(150))
    fake.script(Reply(content=text, chunk_size=1, delay=0.02))
    with connected(server.url) as first:
        cid = first.start("reconnect me")
        first.wait_until(lambda evs: len(tokens(first.of(cid))) >= 20, 10, "20 tokens")
        first.disconnect()
        before = first.of(cid)
    assert not any(e.name == "done" for e in before)
    last_seq = before[-1].payload["seq"]
    with connected(server.url) as second:
        wait_until(
            lambda: second.call("get_conversation", {"conversation_id": cid})["seq"] > last_seq,
            10,
            "events the first client missed",
        )
        ack = second.call("join", {"conversation_id": cid, "after_seq": last_seq})
        assert ack["ok"] is True
        after = second.wait_done(cid)
    seqs = [e.payload["seq"] for e in after]
    assert seqs == list(range(last_seq + 1, last_seq + 1 + len(seqs)))
    assert text_of(before) + text_of(after) == text
    assert_contiguous(before + after)


def test_two_clients_in_one_room_see_the_same_stream(server: ServerProcess, fake: FakeLLM):
    fake.script(Reply(content="shared " * 30, chunk_size=3, delay=0.01))
    with connected(server.url) as owner, connected(server.url) as watcher:
        cid = owner.start("share this")
        assert watcher.call("join", {"conversation_id": cid, "after_seq": 0})["ok"]
        mine, theirs = owner.wait_done(cid), watcher.wait_done(cid)
    assert [(e.name, e.payload) for e in mine] == [(e.name, e.payload) for e in theirs]
    assert text_of(mine) == "shared " * 30
    assert_contiguous(mine)


def test_twenty_concurrent_conversations_do_not_mix(server: ServerProcess, fake: FakeLLM):
    def respond(request: RecordedRequest) -> Response:
        return Reply(content=expected(request.last_user_text), chunk_size=3, delay=0.003)

    def expected(prompt: str) -> str:
        return f"<{prompt}>" * 12

    fake.responder = respond
    with connected(server.url) as left, connected(server.url) as right:
        owners = [left if n % 2 else right for n in range(20)]
        started: dict[str, tuple[EventClient, str]] = {}
        for n, owner in enumerate(owners):
            prompt = f"conversation {n:02d}"
            started[owner.start(prompt)] = (owner, prompt)
        for cid, (owner, prompt) in started.items():
            events = owner.wait_done(cid, timeout=30)
            assert text_of(events) == expected(prompt), prompt
            assert_contiguous(events)
            assert events[0].payload["seq"] == 1
            assert events[-1].payload["reason"] == "complete"
        for owner in (left, right):
            mine = {cid for cid, (o, _) in started.items() if o is owner}
            seen = {
                e.payload["conversation_id"] for e in owner.events if "conversation_id" in e.payload
            }
            assert seen == mine


# --- access ----------------------------------------------------------------------------


@pytest.fixture
def brief_close_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    """A refused client closes its WebSocket (python-socketio disconnects inside `connect`), and
    websocket-client then waits up to 3 s for the server's close frame, which the threading
    server already sent and the client's read loop consumed: 3 s of nothing per refusal. The
    refusal is told before that wait; a close frame that does come still ends it at once."""
    monkeypatch.setattr(
        websocket.WebSocket,
        "close",
        functools.partialmethod(websocket.WebSocket.close, timeout=0.25),
    )


@pytest.mark.parametrize("token", ["wrong-token", None])
@pytest.mark.parametrize("transports", [None, ["websocket"]])
@pytest.mark.usefixtures("brief_close_wait")
def test_connect_without_the_token_is_refused(
    server: ServerProcess, token: str | None, transports: list[str] | None
):
    client = StockSocketIOClient(server.url, token=token, transports=transports)
    with pytest.raises(socketio.exceptions.ConnectionError):
        client.connect()
    assert not client.sio.connected


@pytest.mark.parametrize("transports", [None, ["websocket"]])
def test_origin_check(server: ServerProcess, transports: list[str] | None):
    foreign = StockSocketIOClient(server.url, transports=transports, origin="http://evil.example")
    with pytest.raises(socketio.exceptions.ConnectionError):
        foreign.connect()
    same = StockSocketIOClient(server.url, transports=transports, origin=server.url).connect()
    try:
        assert same.call("get_status")["ok"] is True
    finally:
        same.disconnect()


@pytest.mark.parametrize("mode", MODES)
def test_restart_keeps_every_conversation(fake: FakeLLM, tmp_path: Path, mode: str):
    fake.script(
        Reply(content="first answer"),
        Reply(content="second answer"),
        Reply(content="after restart"),
    )
    extra = {"AGENT_ALLOWED_ORIGINS": json.dumps(["http://allowed.example"])}
    process = ServerProcess(
        tmp_path / "ws",
        tmp_path / "data",
        base_url=fake.base_url,
        api_key=fake.api_key,
        async_mode=mode,
        env=extra,
    ).start()
    try:
        with connected(process.url, origin="http://allowed.example") as sio:
            one = sio.start("first question")
            first_done = sio.wait_done(one)[-1].payload["seq"]
            two = sio.start("second question")
            sio.wait_done(two)
            before = sio.call("list_conversations")["conversations"]
    finally:
        assert process.stop() == 0
    with process.start(), connected(process.url) as sio:
        after = sio.call("list_conversations")["conversations"]
        assert after == before and {c["id"] for c in after} == {one, two}
        got = sio.call("get_conversation", {"conversation_id": one})
        assert [(m["role"], m["content"]) for m in got["messages"]] == [
            ("user", "first question"),
            ("assistant", "first answer"),
        ]
        assert sio.start("and now?", one) == one
        events = sio.wait_done(one)
    assert events[0].payload["seq"] == first_done + 1
    assert text_of(events) == "after restart"
    sent = [m["content"] for m in fake.chat_requests[-1].messages[1:]]
    assert sent == ["first question", "first answer", "and now?"]
