"""workspace_client against the real server (`main.py web`) on the fake model: typed events in
order, approvals, cancel, conversations and files, a dropped socket, a server restart, asyncio."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import workspace_client.client
from protocol.events import Done, Event, Status, Token, ToolEvent
from tests.fake_llm import Call, FakeLLM, Reply
from tests.kit.server import ServerProcess
from tests.kit.settings import TOKEN
from tests.kit.waits import wait_until
from workspace_client import AsyncClient, Client, Reloaded, WorkspaceError
from workspace_client.connection import Disconnected

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.usefixtures("clean_fake"),
    pytest.mark.server(files={"notes.txt": "first line\n", "src/app.py": "print('hi')\n"}),
]


@pytest.fixture
def client(server: ServerProcess) -> Iterator[Client]:
    with Client(server.url, TOKEN) as connected:
        yield connected


def text(events: list[Event]) -> str:
    return "".join(e.text for e in events if isinstance(e, Token))


def seqs(events: list[Event]) -> list[int]:
    return [e.seq for e in events if e.seq is not None]


def test_a_task_streams_typed_events_in_order(client: Client, fake: FakeLLM):
    fake.script(Reply(content="Hello from the fake model.", chunk_size=4))
    events = list(client.run("say hello"))
    assert text(events) == "Hello from the fake model."
    assert any(isinstance(e, Status) for e in events)
    done = events[-1]
    assert isinstance(done, Done) and done.reason == "complete" and done.depth is None
    assert done.usage.prompt_tokens > 0
    numbers = seqs(events)
    assert numbers == list(range(numbers[0], numbers[0] + len(numbers)))


def test_a_fast_stream_of_3000_deltas_arrives_once_in_order(client: Client, fake: FakeLLM):
    content = "".join(chr(ord("a") + i % 26) for i in range(3000))
    fake.script(Reply(content=content, chunk_size=1))
    events = list(client.run("stream 3000"))
    assert sum(isinstance(e, Token) for e in events) == 3000
    assert text(events) == content
    numbers = seqs(events)
    assert numbers == list(range(numbers[0], numbers[0] + len(numbers)))


def test_a_batched_client_gets_each_delta_as_its_own_token(server: ServerProcess, fake: FakeLLM):
    content = "".join(chr(ord("a") + i % 26) for i in range(3000))
    fake.script(Reply(content=content, chunk_size=1))
    with Client(server.url, TOKEN, batch_deltas=True) as batched:
        events = list(batched.run("stream 3000 gathered"))
    assert sum(isinstance(e, Token) for e in events) == 3000 and text(events) == content
    numbers = seqs(events)
    assert numbers == list(range(numbers[0], numbers[0] + len(numbers)))


def test_approvals_are_answered_through_the_callback(server: ServerProcess, fake: FakeLLM):
    asked: list[ToolEvent] = []

    def decline_then_allow(event: ToolEvent) -> bool:
        asked.append(event)
        return len(asked) > 1

    fake.script(
        Reply(tool_calls=[Call("run_command", {"command": "echo one"})]),
        Reply(tool_calls=[Call("run_command", {"command": "echo two"})]),
        Reply(content="done"),
    )
    with Client(server.url, TOKEN, on_approval=decline_then_allow) as approving:
        events = list(approving.run("run two commands", approval="ask"))
    assert [e.preview for e in asked] == ["echo one", "echo two"]
    results = [e for e in events if isinstance(e, ToolEvent) and e.phase == "result"]
    assert [r.ok for r in results] == [False, True]
    assert "declined" in (results[0].output or "") and "two" in (results[1].output or "")
    assert isinstance(events[-1], Done) and events[-1].reason == "complete"


def test_cancel_ends_the_task_as_cancelled(client: Client, fake: FakeLLM):
    fake.script(Reply(content="z" * 2000, chunk_size=1, delay=0.05))
    started = client.send("never ending")
    seen: list[Event] = []
    for event in client.events(started.conversation_id):
        seen.append(event)
        if isinstance(event, Token) and sum(isinstance(e, Token) for e in seen) == 5:
            client.cancel(started.conversation_id)
    assert isinstance(seen[-1], Done) and seen[-1].reason == "cancelled"
    with pytest.raises(WorkspaceError) as refused:
        client.cancel(started.conversation_id)
    assert refused.value.code == "not_running"


def test_conversations_and_files(client: Client, fake: FakeLLM, server: ServerProcess):
    fake.script(Reply(content="noted"))
    started = client.send("remember this")
    list(client.events(started.conversation_id))
    listed = {c["id"]: c for c in client.conversations()}
    assert started.conversation_id in listed and listed[started.conversation_id]["running"] is False
    assert client.rename_conversation(started.conversation_id, "  A   title ") == "A title"
    got = client.get_conversation(started.conversation_id)
    assert got["conversation"]["title"] == "A title"
    assert [m["role"] for m in got["messages"]] == ["user", "assistant"]
    client.delete_conversation(started.conversation_id)
    with pytest.raises(WorkspaceError) as missing:
        client.get_conversation(started.conversation_id)
    assert missing.value.code == "not_found"

    top = {e["name"]: e for e in client.list_files()}
    assert top["notes.txt"]["is_dir"] is False and top["src"]["is_dir"] is True
    assert [e["path"] for e in client.list_files("src")] == ["src/app.py"]
    assert client.read_file("notes.txt")["content"] == "first line\n"
    with pytest.raises(WorkspaceError) as absent:
        client.read_file("nope.txt")
    assert absent.value.code == "not_found"


def test_upload_then_undo(client: Client, fake: FakeLLM, tmp_path: Path):
    local = tmp_path / "data.csv"
    local.write_text("a,b\n1,2\n")
    uploaded = client.upload(local)
    assert uploaded["path"] == "uploads/data.csv" and uploaded["kind"] == "csv"
    fake.script(
        Reply(tool_calls=[Call("create_file", {"path": "made.txt", "content": "new\n"})]),
        Reply(content="made it"),
    )
    started = client.send("make a file", attachments=[uploaded["path"]])
    assert isinstance(list(client.events(started.conversation_id))[-1], Done)
    assert client.read_file("made.txt")["content"] == "new\n"
    undone = client.undo(started.conversation_id)
    assert undone["removed"] == ["made.txt"]


def test_a_dropped_socket_mid_stream_is_rejoined_without_a_gap(client: Client, fake: FakeLLM):
    content = "".join(chr(ord("a") + i % 26) for i in range(400))
    fake.script(Reply(content=content, chunk_size=1, delay=0.005))
    started = client.send("stream through a drop")
    events: list[Event] = []
    first_connection = client._connection
    for event in client.events(started.conversation_id):
        events.append(event)
        if len(events) == 100:
            first_connection._ws.sock.shutdown(socket.SHUT_RDWR)  # the network goes away
    assert client._connection is not first_connection, "the socket was not dropped"
    assert text(events) == content
    numbers = seqs(events)
    assert numbers == list(range(numbers[0], numbers[0] + len(numbers)))
    assert isinstance(events[-1], Done) and events[-1].reason == "complete"


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGKILL], ids=["restart", "crash"])
def test_a_server_restart_mid_task_ends_the_iterator_interrupted(
    tmp_path: Path, fake_llm: FakeLLM, signum: int, monkeypatch: pytest.MonkeyPatch
):
    # The client's reconnect backoff doubles from 0.1 s to 5 s: a restart of 3-12 s was then
    # found 2-4 s late (measured: 3.4 s between the new server's URL line and "back"). Capped at
    # 0.5 s it tries as it did, more often; what it does once back is what this test checks.
    monkeypatch.setattr(workspace_client.client, "LAST_RETRY", 0.5)
    fake_llm.script(Reply(content="y" * 3000, chunk_size=1, delay=0.02))
    with (
        ServerProcess(
            tmp_path / "ws", tmp_path / "data", base_url=fake_llm.base_url, api_key=fake_llm.api_key
        ) as server,
        Client(server.url, TOKEN) as restarting,
    ):
        started = restarting.send("a long answer")
        events: list[Event] = []
        restarted = threading.Event()

        def restart() -> None:
            server.restart(signum=signum)
            restarted.set()

        for event in restarting.events(started.conversation_id):
            events.append(event)
            if len(events) == 50:
                threading.Thread(target=restart, daemon=True).start()
        wait_until(restarted.is_set, 30, "the server's restart")
        done = events[-1]
        assert isinstance(done, Done) and done.reason == "interrupted"
        assert sum(isinstance(e, Done) for e in events) == 1
        if signum == signal.SIGKILL:  # nothing came from the dying server: the history told
            assert any(isinstance(e, Reloaded) for e in events)
        numbers = seqs(events)
        assert numbers == sorted(set(numbers))  # none twice, none out of order
        # The conversation goes on on the restarted server.
        fake_llm.script(Reply(content="back again"))
        after = list(restarting.run("and now?", started.conversation_id))
        assert text(after) == "back again" and isinstance(after[-1], Done)
        assert after[-1].reason == "complete"


def test_the_asyncio_form(server: ServerProcess, fake: FakeLLM):
    fake.script(
        Reply(tool_calls=[Call("run_command", {"command": "echo async"})]),
        Reply(content="async done", chunk_size=2),
    )

    async def allow(event: ToolEvent) -> bool:
        await asyncio.sleep(0)
        return True

    async def main() -> list[Event]:
        async with await AsyncClient.connect(server.url, TOKEN, on_approval=allow) as client:
            events = [e async for e in client.run("run it", approval="ask")]
            assert any(c["id"] == events[-1].conversation_id for c in await client.conversations())
            return events

    events = asyncio.run(main())
    assert text(events) == "async done"
    result = next(e for e in events if isinstance(e, ToolEvent) and e.phase == "result")
    assert result.ok and "async" in (result.output or "")
    assert isinstance(events[-1], Done) and events[-1].reason == "complete"


def test_an_approval_whose_answer_was_lost_is_asked_again(server: ServerProcess, fake: FakeLLM):
    asked: list[ToolEvent] = []
    holder: list[Client] = []

    def lose_the_first_answer(event: ToolEvent) -> bool:
        asked.append(event)
        if len(asked) == 1:  # the network goes away as the answer leaves, never after it
            connection = holder[0]._connection  # (cut earlier, a reconnect could carry it)

            def cut(packet: str) -> None:  # and what is sent on it later finds it gone
                with contextlib.suppress(OSError):
                    connection._ws.sock.shutdown(socket.SHUT_RDWR)
                raise Disconnected("the connection closed as this was sent")

            connection._send = cut  # type: ignore[method-assign]
        return True

    fake.script(Reply(tool_calls=[Call("run_command", {"command": "echo once"})]), Reply("ok"))
    with Client(server.url, TOKEN, on_approval=lose_the_first_answer) as approving:
        holder.append(approving)
        events = list(approving.run("run a command", approval="ask"))
    assert [e.call_id for e in asked] == [asked[0].call_id] * 2, "the call was not asked again"
    results = [e for e in events if isinstance(e, ToolEvent) and e.phase == "result"]
    assert [r.ok for r in results] == [True] and "once" in (results[0].output or "")
    assert isinstance(events[-1], Done) and events[-1].reason == "complete"
