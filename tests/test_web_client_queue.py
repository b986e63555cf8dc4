"""A client that reads nothing while a long answer streams: the server holds at most
AGENT_CLIENT_QUEUE_MB for it, then drops it; everyone else gets every event, and the dropped
client gets exactly the rest when it comes back. In both async modes."""

from __future__ import annotations

import json
import queue
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests.fake_llm import FakeLLM, Reply
from tests.kit.clients import EventClient, assert_contiguous, connected
from tests.kit.events import text_of, tokens
from tests.kit.raw_socket import RawSocketIO
from tests.kit.server import ServerProcess
from tests.kit.settings import TOKEN
from web.transport.client_queue_cap import ClientQueueCap

CAP_MB = 0.5
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.usefixtures("clean_fake"),
    pytest.mark.server(modes=["threading", "eventlet"], env={"AGENT_CLIENT_QUEUE_MB": str(CAP_MB)}),
]
CHUNK = 2000  # characters per token event: a packet of about 2.1 kB
# The kernel takes a few MB for a client before anything waits in the server's queue.
ANSWER = "".join(f"{n:07d} " for n in range(1_000_000))  # 8 MB


def drops(data_dir: Path) -> list[dict[str, Any]]:
    """The server's log records of dropped clients."""
    lines = (data_dir / "logs" / "agent.jsonl").read_text().splitlines()
    return [record for line in lines if "client dropped" in (record := json.loads(line))["message"]]


def seqs_of(events: list[tuple[str, dict[str, Any]]]) -> list[int]:
    return [int(payload["seq"]) for _, payload in events if "seq" in payload]


class Packet:
    def __init__(self, data: str) -> None:
        self.data = data


def test_the_queue_counts_what_waits_and_drops_past_the_cap_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    eio = SimpleNamespace(_async={"queue": queue.Queue, "websocket": None})
    cap = ClientQueueCap(eio, 100, str)
    filled: list[Any] = []
    monkeypatch.setattr(cap, "full", filled.append)
    waiting = eio._async["queue"]()
    waiting.put(Packet("3" + "a" * 500))  # an ack, asked for: no backlog
    with cap.replay():
        waiting.put(Packet("2" + "r" * 500))
    waiting.put(Packet("2" + "e" * 60))
    assert waiting.queued_bytes == 1063 and filled == []
    waiting.put(Packet("2" + "e" * 60))
    assert filled == [waiting] and waiting.queued_bytes == 1124
    waiting.put(Packet("2" + "e" * 60))  # full: taken no more, dropped once
    waiting.put(None)  # but the writer's end mark
    assert filled == [waiting] and waiting.qsize() == 5
    while waiting.qsize():
        waiting.get()
    assert waiting.queued_bytes == 0 and waiting.asked == 0


def test_a_client_that_reads_nothing_is_dropped_and_gets_the_rest_on_return(
    server: ServerProcess, fake: FakeLLM, client: EventClient
):
    fake.script(Reply(content=ANSWER, chunk_size=CHUNK, delay=0.001, latency=1.0))
    stuck = RawSocketIO(server.port, TOKEN, receive_buffer=4096)
    try:
        cid = client.start("a long answer, please")
        assert stuck.call("join", {"conversation_id": cid, "after_seq": 0})["ok"]
        stuck.stop_reading()
        events = client.wait_done(cid, timeout=120)
        assert stuck.drain(timeout=30), "the server kept the connection of a client reading nothing"
    finally:
        stuck.close()
    assert_contiguous(events)
    assert text_of(events) == ANSWER, "the client that reads lost events"

    [dropped] = [d for d in drops(server.data_dir) if d["sid"] == stuck.sid]
    cap = int(CAP_MB * 1024 * 1024)
    assert dropped["cap_bytes"] == cap
    assert cap < dropped["queued_bytes"] <= cap + 2 * CHUNK + 1000, dropped

    got = stuck.events()  # what reached it before the drop: the replay's first events
    seen = seqs_of(got)
    assert seen == list(range(1, len(seen) + 1))
    last_seq, final = len(seen), events[-1].payload["seq"]
    with connected(server.url) as back:
        ack = back.call("join", {"conversation_id": cid, "after_seq": last_seq})
        assert ack["ok"] and ack["replays_after"] <= last_seq, ack
        rest = back.wait_done(cid, timeout=60)
        # An answer it asked for is no backlog, however large: 8 MB against a 0.5 MB cap.
        history = back.call("get_conversation", {"conversation_id": cid}, timeout=30)
        assert history["messages"][-1]["content"] == ANSWER
    assert [e.payload["seq"] for e in rest] == list(range(last_seq + 1, final + 1))
    before = "".join(p["text"] for name, p in got if name == "token")
    assert before + text_of(rest) == ANSWER
    assert len(tokens(rest)) + sum(name == "token" for name, _ in got) == len(tokens(events))
