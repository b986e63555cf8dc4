"""Every view of a conversation sees the message that starts each task: `user_message`, the
task's first event (docs/protocol.md §4.2), through the real server to a second Socket.IO
client, workspace_client's typed events, and `join`'s replay."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from protocol.events import Done, Token, UserMessage
from tests.fake_llm import FakeLLM, Reply
from tests.kit.clients import connected
from tests.kit.events import payloads
from tests.kit.server import ServerProcess
from tests.kit.settings import TOKEN
from workspace_client import Client

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.usefixtures("clean_fake"),
    pytest.mark.server(files={"notes.md": "# Notes\n"}),
]


@pytest.fixture
def client(server: ServerProcess) -> Iterator[Client]:
    with Client(server.url, TOKEN) as connected_client:
        yield connected_client


def test_a_client_that_watches_sees_the_message_first_and_the_sender_gets_it_typed(
    server: ServerProcess, fake: FakeLLM, client: Client
):
    fake.script(Reply(content="First answer."), Reply(content="Second answer.", chunk_size=3))
    first = client.send("the first message")
    events = list(client.events(first.conversation_id))
    assert isinstance(events[0], UserMessage), events[0]  # before the first model call
    assert (events[0].message_id, events[0].parent_id) == (first.message_id, None)
    said = (events[0].text, events[0].mode, events[0].agent)
    assert said == ("the first message", "fast", "general")
    last_seq = max(e.seq for e in events if e.seq is not None)
    cid = first.conversation_id

    with connected(server.url) as watcher:  # a second tab, open on the conversation
        joined = watcher.call("join", {"conversation_id": cid, "after_seq": last_seq})
        assert joined["ok"] and joined["last_seq"] == last_seq, joined
        leaf = client.get_conversation(cid)["messages"][-1]["id"]
        second = client.send("and a file", cid, attachments=["notes.md"], mode="thinking")
        seen = watcher.wait_done(cid)
    assert [e.name for e in seen][:2] == ["user_message", "status"]
    message = seen[0].payload
    assert message["seq"] == last_seq + 1  # a seq like every event of the task
    assert message["message_id"] == second.message_id and message["parent_id"] == leaf
    said = (message["text"], message["mode"], message["agent"])
    assert said == ("and a file", "thinking", "general")
    [attached] = message["attachments"]
    assert (attached["path"], attached["name"]) == ("notes.md", "notes.md")
    typed = list(client.events(cid))
    assert isinstance(typed[0], UserMessage) and typed[0].attachments == message["attachments"]
    assert "".join(e.text for e in typed if isinstance(e, Token)) == "Second answer."
    assert isinstance(typed[-1], Done)


def test_join_replays_it_and_a_view_that_read_the_record_knows_it_by_its_id(
    server: ServerProcess, fake: FakeLLM, client: Client
):
    fake.script(
        Reply(content="An answer."),
        Reply(content="Another branch.", chunk_size=2, stall_after=1, stall=30),  # runs on
    )
    first = client.send("the message")
    list(client.events(first.conversation_id))
    cid = first.conversation_id
    before = client.get_conversation(cid)["seq"]
    edited = client.send("the message, edited", cid, parent_id=None)  # a new root: a branch

    with connected(server.url) as late:  # a tab that opens the conversation now
        snapshot = late.call("get_conversation", {"conversation_id": cid})
        assert snapshot["running"] and snapshot["seq"] == before, snapshot
        # The records hold the message already (the record's seq is before its event's)...
        assert edited.message_id in [record["id"] for record in snapshot["messages"]]
        late.call("join", {"conversation_id": cid, "after_seq": snapshot["seq"]})
        late.wait_until(lambda events: payloads(events, "user_message"), 20, "the replay")
        client.cancel(cid)
        replayed = late.wait_done(cid)
    # ...and the replay after that seq has its event: a view knows it by its id.
    message = replayed[0].payload
    assert replayed[0].name == "user_message" and message["seq"] == before + 1
    assert message["message_id"] == edited.message_id
    assert "parent_id" in message and message["parent_id"] is None  # null: a root
    assert replayed[-1].payload["reason"] == "cancelled"
