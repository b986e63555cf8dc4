"""The real server process (`main.py web`) on the fake model, in both async modes: its streams."""

from __future__ import annotations

import time

import pytest

from tests.fake_llm import Call, FakeLLM, Reply
from tests.kit.clients import EventClient, ack_latency, assert_contiguous, connected
from tests.kit.events import Received, text_of, tokens
from tests.kit.server import ServerProcess
from tests.kit.waits import wait_until

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.usefixtures("clean_fake"),
    pytest.mark.server(modes=["threading", "eventlet"]),
]
STREAM_DELAY = 0.0005  # the fast stream's pause between deltas


# --- streaming -------------------------------------------------------------------------


def test_fast_stream_gives_one_token_event_per_delta_in_order(
    server: ServerProcess, fake: FakeLLM, client: EventClient
):
    text = "".join(chr(ord("a") + i % 26) for i in range(3000))
    # 2,000 deltas a second at most (a model sends tens): the stream lasts >= 1.5 s, so tokens
    # relayed as they come arrive spread over most of it, however slow the task is to start.
    fake.script(Reply(content=text, chunk_size=1, delay=STREAM_DELAY))
    cid = client.start("stream 3000")
    events = client.wait_done(cid)
    assert len(tokens(events)) == 3000
    assert text_of(events) == text
    assert_contiguous(events)
    assert events[-1].name == "done" and events[-1].payload["reason"] == "complete"
    spread = tokens(events)[-1].at - tokens(events)[0].at
    assert spread > 0.5 * 3000 * STREAM_DELAY, f"the tokens came within {spread:.2f}s: piled up"


def test_slow_stream_arrives_while_streaming(fake: FakeLLM, client: EventClient):
    text = "".join(chr(ord("A") + i % 26) for i in range(200))
    delay = 0.01
    fake.script(Reply(content=text, chunk_size=1, delay=delay))
    cid = client.start("stream 200 slowly")
    events = client.wait_done(cid)
    arrived = tokens(events)
    assert len(arrived) == 200 and text_of(events) == text
    assert_contiguous(events)
    spread = arrived[-1].at - arrived[0].at
    assert spread >= 0.5 * 200 * delay, f"tokens came in a burst ({spread:.2f}s)"
    halfway = arrived[0].at + spread / 2
    early = sum(1 for e in arrived if e.at < halfway)
    assert 50 <= early <= 150, f"{early} of 200 tokens in the first half of the stream"


def deltas_of(events: list[Received]) -> list[tuple[int, str]]:
    """(seq, text) of every token delta a batched client got, plain or gathered."""
    got: list[tuple[int, str]] = []
    for event in events:
        if event.name == "token":
            got.append((event.payload["seq"], event.payload["text"]))
        elif event.name == "deltas" and event.payload["of"] == "token":
            first = event.payload["first_seq"]
            got += [(first + i, text) for i, text in enumerate(event.payload["texts"])]
            assert event.payload["seq"] == first + len(event.payload["texts"]) - 1
    return got


def test_a_batched_client_gets_a_pouring_stream_gathered_in_one_order(
    server: ServerProcess, fake: FakeLLM, client: EventClient
):
    text = "".join(chr(ord("a") + i % 26) for i in range(3000))
    fake.script(Reply(content=text, chunk_size=1, latency=0.5))
    with connected(server.url, batch_deltas=True) as batched:
        cid = batched.start("stream 3000 to a page")
        assert client.call("join", {"conversation_id": cid, "after_seq": 0})["ok"]
        gathered = batched.wait_done(cid)
        plain = client.wait_done(cid)
    assert len(tokens(plain)) == 3000 and text_of(plain) == text  # one per delta, as ever
    got = deltas_of(gathered)
    assert "".join(t for _, t in got) == text
    assert [seq for seq, _ in got] == [e.payload["seq"] for e in tokens(plain)]
    messages = [e for e in gathered if e.name in ("token", "deltas")]
    assert len(messages) < 1000, f"{len(messages)} messages for 3000 deltas: not gathered"
    seqs = [
        seq
        for e in gathered
        for seq in (
            [s for s, _ in deltas_of([e])] if e.name in ("token", "deltas") else [e.payload["seq"]]
        )
    ]
    assert seqs == sorted(seqs) and gathered[-1].name == "done"
    assert [e.name for e in plain if e.name not in ("token",)] == [
        e.name for e in gathered if e.name not in ("token", "deltas")
    ]


def test_a_batched_client_gets_a_paced_stream_as_it_comes(server: ServerProcess, fake: FakeLLM):
    fake.script(Reply(content="x" * 40, chunk_size=1, delay=0.04))
    with connected(server.url, batch_deltas=True) as batched:
        cid = batched.start("stream slowly to a page")
        events = batched.wait_done(cid)
    assert "".join(t for _, t in deltas_of(events)) == "x" * 40
    single = sum(e.name == "token" for e in events)
    assert single >= 30, f"only {single} of 40 deltas 40 ms apart went out as they came"


def test_cancel_during_a_slow_stream(fake: FakeLLM, client: EventClient):
    fake.script(Reply(content="z" * 2000, chunk_size=1, delay=0.05))
    cid = client.start("never ending")
    client.wait_until(lambda evs: len(tokens(client.of(cid))) >= 5, 10, "first tokens")
    started = time.monotonic()
    assert client.call("cancel", {"conversation_id": cid}) == {"ok": True}
    events = client.wait_done(cid, timeout=5)
    assert events[-1].payload["reason"] == "cancelled"
    assert events[-1].at - started < 1.0
    assert len(tokens(events)) < 100


def test_a_model_call_waiting_on_the_network_does_not_block_the_server(
    fake: FakeLLM, client: EventClient
):
    fake.script(Reply(content="late", latency=1.2))
    asked = len(fake.chat_requests)
    cid = client.start("take your time")
    wait_until(lambda: len(fake.chat_requests) > asked, 5, "the model call")
    slowest = max(ack_latency(client) for _ in range(5))
    events = client.wait_done(cid)
    assert text_of(events) == "late"
    assert slowest < 0.2, f"an ack took {slowest:.2f}s while the model call waited"


def test_command_output_streams_and_the_server_stays_responsive(
    server: ServerProcess, fake: FakeLLM, client: EventClient
):
    command = "for i in 1 2 3 4 5; do echo line$i; sleep 0.25; done"
    fake.script(Reply(tool_calls=[Call("run_command", {"command": command})]), Reply(content="ran"))
    cid = client.start("run it")
    client.wait_until(
        lambda evs: any(
            e.name == "tool" and e.payload["phase"] == "output" for e in client.of(cid)
        ),
        10,
        "command output",
    )
    slowest = max(ack_latency(client) for _ in range(8))
    events = client.wait_done(cid)
    outputs = [e for e in events if e.name == "tool" and e.payload["phase"] == "output"]
    result = next(e for e in events if e.name == "tool" and e.payload["phase"] == "result")
    assert result.payload["ok"] is True and "line5" in result.payload["output"]
    assert "".join(e.payload["delta"] for e in outputs).split() == [f"line{i}" for i in range(1, 6)]
    assert result.at - outputs[0].at > 0.6, "command output was not streamed"
    assert slowest < 0.3, f"an ack took {slowest:.2f}s while a command ran"


# --- a supervisor's sub-agent ----------------------------------------------------------


def test_a_supervisor_task_streams_its_sub_agent_nested_in_order(
    server: ServerProcess, fake: FakeLLM
):
    fake.script(
        Reply(tool_calls=[Call("delegate_to_research", {"task": "list the workspace"})]),
        Reply(content="Looking.", tool_calls=[Call("list_files", {})], chunk_size=3),
        Reply(content="The workspace holds what list_files showed.", chunk_size=5),
        Reply(content="Research says it is all there.", chunk_size=4),
    )
    with connected(server.url) as client:
        cid = client.start("what is here?", agent="supervisor", approval="auto")
        events = client.wait_done(cid)
    assert_contiguous(events)
    call = next(e.payload for e in events if e.name == "tool" and e.payload["phase"] == "start")
    assert call["name"] == "delegate_to_research" and call["agent"] == "supervisor"
    nested = [e.payload for e in events if e.payload.get("parent_call_id")]
    assert {p["agent"] for p in nested} == {"research"} and {p["depth"] for p in nested} == {1}
    assert text_of([e for e in events if e.payload.get("depth")]) == (
        "Looking.The workspace holds what list_files showed."
    )
    result = next(
        e.payload
        for e in events
        if e.name == "tool"
        and e.payload["phase"] == "result"
        and e.payload["call_id"] == call["call_id"]
    )
    assert result["ok"] and result["output"].startswith("The workspace holds")
    assert text_of([e for e in events if not e.payload.get("depth")]) == (
        "Research says it is all there."
    )
