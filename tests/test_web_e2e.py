"""The real server process (`main.py web`) against the fake model, driven by Socket.IO clients.

Every test runs in both async modes; the server of each mode is shared by the module.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import socketio

from tests.fake_llm import Call, FakeLLM, RecordedRequest, Reply, Response
from tests.kit import Received, wait_until
from tests.web_helpers import EventClient, ServerProcess, assert_contiguous, connected

pytestmark = pytest.mark.e2e

ASYNC_MODES = ["threading", "eventlet"]


@pytest.fixture(autouse=True)
def clean_fake(fake: FakeLLM) -> Iterator[None]:
    """Every test scripts its own replies; none may be left over for the next one."""
    fake.responder = None
    yield
    fake.responder = None
    assert fake.pending == 0, "a scripted reply was not consumed"


def tokens(events: list[Received]) -> list[Received]:
    return [e for e in events if e.name == "token"]


def text_of(events: list[Received]) -> str:
    return "".join(e.payload["text"] for e in tokens(events))


def ack_latency(client: EventClient, event: str = "get_status") -> float:
    started = time.monotonic()
    assert client.call(event, {})["ok"]
    return time.monotonic() - started


def probe_watcher(client: EventClient, workspace: Path, timeout: float = 15) -> None:
    """Wait until the workspace watcher reports changes (its child process is up)."""
    probes = itertools.count()

    def reported() -> bool:
        probe = workspace / f"watch-probe-{next(probes)}.txt"
        probe.write_text("probe")
        try:
            return bool(client.wait_until(lambda evs: _tree_event(evs, probe.name), 0.5, "probe"))
        except AssertionError:
            return False
        finally:
            probe.unlink()

    wait_until(reported, timeout, "the watcher to report a change", every=0)


def _tree_event(
    events: list[Received], path: str, *, with_seq: bool | None = None
) -> Received | None:
    for event in events:
        if event.name != "file_tree":
            continue
        if with_seq is not None and ("seq" in event.payload) != with_seq:
            continue
        if any(path in (c["path"], c.get("dest_path")) for c in event.payload["changes"]):
            return event
    return None


# --- streaming -------------------------------------------------------------------------


def test_fast_stream_gives_one_token_event_per_delta_in_order(
    server: ServerProcess, fake: FakeLLM, client: EventClient
):
    text = "".join(chr(ord("a") + i % 26) for i in range(3000))
    fake.script(Reply(content=text, chunk_size=1))
    sent_at = time.monotonic()
    cid = client.start("stream 3000")
    events = client.wait_done(cid)
    assert len(tokens(events)) == 3000
    assert text_of(events) == text
    assert_contiguous(events)
    assert events[-1].name == "done" and events[-1].payload["reason"] == "complete"
    first, done = tokens(events)[0].at - sent_at, events[-1].at - sent_at
    assert first < 0.5 * done, f"first token at {first:.2f}s of {done:.2f}s: piled up"


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


def test_tool_phases_and_file_tree_events(
    server: ServerProcess, fake: FakeLLM, client: EventClient
):
    probe_watcher(client, server.workspace)
    fake.script(
        Reply(
            tool_calls=[Call("create_file", {"path": "made/by_agent.txt", "content": "hi"})],
            chunk_size=4,
        ),
        Reply(content="created"),
    )
    cid = client.start("create a file")
    events = client.wait_done(cid)
    assert_contiguous(events)
    tool = [e.payload for e in events if e.name == "tool"]
    phases = [t["phase"] for t in tool]
    assert phases[0] == "start" and phases[-2:] == ["end", "result"]
    assert set(phases[1:-2]) == {"args"} and len(phases) > 3
    assert len({t["call_id"] for t in tool}) == 1 and {t["name"] for t in tool} == {"create_file"}
    assert json.loads("".join(t["delta"] for t in tool if t["phase"] == "args")) == {
        "path": "made/by_agent.txt",
        "content": "hi",
    }
    assert tool[-2]["arguments"]["path"] == "made/by_agent.txt"
    assert tool[-1]["ok"] is True and isinstance(tool[-1]["duration_ms"], int)
    result_at = next(e.at for e in events if e.name == "tool" and e.payload["phase"] == "result")
    in_task = _tree_event(events, "made/by_agent.txt", with_seq=True)
    assert in_task is not None and in_task.at - result_at < 1.0
    live = client.wait_until(
        lambda evs: _tree_event(evs, "made/by_agent.txt", with_seq=False),
        2,
        "watcher event for the agent's file",
    )
    assert live.at - result_at < 1.0
    assert (server.workspace / "made" / "by_agent.txt").read_text() == "hi"


def test_file_tree_event_for_a_change_made_outside_the_agent(
    server: ServerProcess, client: EventClient
):
    probe_watcher(client, server.workspace)
    made_at = time.monotonic()
    (server.workspace / "outside.md").write_text("# made by hand\n")
    event = client.wait_until(lambda evs: _tree_event(evs, "outside.md"), 2, "file_tree")
    assert event.at - made_at < 1.0
    assert "seq" not in event.payload
    change = next(c for c in event.payload["changes"] if c["path"] == "outside.md")
    assert change["event"] in ("created", "modified") and change["is_dir"] is False
    moved_at = time.monotonic()
    (server.workspace / "outside.md").rename(server.workspace / "renamed.md")
    moved = client.wait_until(lambda evs: _tree_event(evs, "renamed.md"), 2, "move")
    assert moved.at - moved_at < 1.0


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


@pytest.mark.parametrize("token", ["wrong-token", None])
@pytest.mark.parametrize("transports", [None, ["websocket"]])
def test_connect_without_the_token_is_refused(
    server: ServerProcess, token: str | None, transports: list[str] | None
):
    client = EventClient(server.url, token=token, transports=transports)
    with pytest.raises(socketio.exceptions.ConnectionError):
        client.connect()
    assert not client.sio.connected


@pytest.mark.parametrize("transports", [None, ["websocket"]])
def test_origin_check(server: ServerProcess, transports: list[str] | None):
    foreign = EventClient(server.url, transports=transports, origin="http://evil.example")
    with pytest.raises(socketio.exceptions.ConnectionError):
        foreign.connect()
    with connected(server.url, transports=transports, origin=server.url) as same:
        assert same.call("get_status")["ok"] is True


@pytest.mark.parametrize("mode", ASYNC_MODES)
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


# --- a large workspace -----------------------------------------------------------------


def _many_files(root: Path, count: int) -> None:
    for n in range(count):
        folder = root / f"dir{n // 100:03d}"
        if n % 100 == 0:
            folder.mkdir(parents=True)
        (folder / f"file{n:05d}.txt").write_bytes(b"x")


def test_twenty_thousand_files_do_not_stall_the_server(fake: FakeLLM, tmp_path: Path):
    _many_files(tmp_path / "ws", 20_000)
    process = ServerProcess(
        tmp_path / "ws", tmp_path / "data", base_url=fake.base_url, api_key=fake.api_key
    )
    with process, connected(process.url) as sio:
        latencies: list[float] = []
        stop = threading.Event()

        def ping() -> None:
            until = time.monotonic() + 2
            while not stop.is_set() or time.monotonic() < until:
                latencies.append(ack_latency(sio))
                time.sleep(0.02)

        pinger = threading.Thread(target=ping)
        pinger.start()
        try:
            started = time.monotonic()
            tree = sio.call("get_file_tree", timeout=10)
            tree_seconds = time.monotonic() - started
            probe_watcher(sio, tmp_path / "ws", timeout=30)
        finally:
            stop.set()
            pinger.join()
    assert tree["ok"] and tree_seconds < 2.0, f"get_file_tree took {tree_seconds:.2f}s"
    assert len(latencies) > 20 and max(latencies) < 0.5, f"slowest ack {max(latencies):.2f}s"


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
