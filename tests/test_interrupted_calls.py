"""A task killed mid-call leaves the call without a result; whoever next holds the
conversation appends an `interrupted` one after it (docs/protocol.md §5: each call's result follows
it on its branch), once, so the history and every request stay valid."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from core.interrupted_calls import INTERRUPTED_CALL
from history.context_builder import MISSING_RESULT
from history.store import ConversationStore
from protocol.records import ToolCallRecord
from tests.fake_llm import Call, FakeLLM, Reply
from tests.kit.clients import Web, connected
from tests.kit.cluster import ClusterServer
from tests.kit.events import Received


def history(data_dir: Path, cid: str) -> list[dict[str, Any]]:
    """messages.jsonl as it is on disk, line by line."""
    lines = (data_dir / "conversations" / cid / "messages.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def command_started(events: list[Received]) -> bool:
    return any(
        e.name == "tool" and e.payload["phase"] == "output" and "started" in e.payload["delta"]
        for e in events
    )


def roles(records: list[dict[str, Any]]) -> list[str]:
    return [r["role"] for r in records]


def test_a_command_cut_by_a_kill_gets_an_interrupted_result_after_the_restart(
    fake_llm: FakeLLM, tmp_path: Path
) -> None:
    fake_llm.script(
        Reply(
            content="Three steps.",
            tool_calls=[
                Call("create_file", {"path": "a.txt", "content": "a\n"}),
                Call("run_command", {"command": "echo started; sleep 20"}),
                Call("list_files", {}),
            ],
        )
    )
    data = tmp_path / "data"
    server = ClusterServer(
        tmp_path / "ws", data, base_url=fake_llm.base_url, api_key=fake_llm.api_key
    )
    try:
        with connected(server.start().url) as client:
            cid = client.start("three steps")
            client.wait_until(command_started, timeout=30, what="the command's output")
            server.kill()  # as a crash: nothing more is written
        assert roles(history(data, cid)) == ["user", "assistant", "tool"]
        with connected(server.start().url) as client:
            shown = client.call("get_conversation", {"conversation_id": cid})["messages"]
        assert history(data, cid) == shown  # appended to messages.jsonl, in this order
        server.stop()
        with connected(server.start().url) as client:  # loaded again: nothing more is written
            assert client.call("get_conversation", {"conversation_id": cid})["messages"] == shown
            fake_llm.script(Reply(content="Carrying on."))
            client.start("go on", conversation_id=cid)
            assert client.wait_done(cid)[-1].payload["reason"] == "complete"
    finally:
        server.stop()
    _, assistant, created, cut, never_run = shown
    calls = [call["id"] for call in assistant["tool_calls"]]
    assert [r["tool_call_id"] for r in (created, cut, never_run)] == calls
    assert [r["parent_id"] for r in (created, cut, never_run)] == [
        assistant["id"],
        created["id"],
        cut["id"],
    ]
    assert created["meta"]["ok"] is True and "interrupted" not in created["meta"]
    for result, name in ((cut, "run_command"), (never_run, "list_files")):
        assert result["name"] == name and result["content"] == INTERRUPTED_CALL
        assert result["meta"] == {"ok": False, "interrupted": True}
    after = history(data, cid)
    assert after[: len(shown)] == shown and roles(after[len(shown) :]) == ["user", "assistant"]
    assert after[len(shown)]["parent_id"] == never_run["id"]
    request = fake_llm.chat_requests[-1]
    assert request.status == 200  # the fake refuses what a provider would
    assert roles(request.messages) == [
        "system",
        "user",
        "assistant",
        "tool",
        "tool",
        "tool",
        "user",
    ]
    assert [m["content"] for m in request.messages[4:6]] == [INTERRUPTED_CALL] * 2


def run_call(call_id: str) -> ToolCallRecord:
    arguments = json.dumps({"command": "make"})
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": "run_command", "arguments": arguments},
    }


def test_a_call_cut_on_another_branch_is_answered_when_a_task_goes_on_there(
    make_web: Callable[..., Web], fake_llm: FakeLLM, tmp_path: Path
) -> None:
    conversation = ConversationStore(tmp_path / "data").create(title="two branches")
    conversation.append("user", "build it")
    cut = conversation.append("assistant", "", tool_calls=[run_call("call-1")])
    conversation.append("user", "something else instead", parent_id=None)
    conversation.append("assistant", "Done that.")
    stored = history(tmp_path / "data", conversation.id)
    client = make_web().connect()
    shown = client.call("get_conversation", {"conversation_id": conversation.id})["messages"]
    assert shown == stored == history(tmp_path / "data", conversation.id)  # the leaf stays
    fake_llm.script(Reply(content="Back on the build."))
    client.send("go on with the build", conversation.id, parent_id=cut["id"])
    client.wait_done(conversation.id)
    result, user, answer = history(tmp_path / "data", conversation.id)[len(stored) :]
    assert (result["parent_id"], result["tool_call_id"]) == (cut["id"], "call-1")
    assert result["meta"]["interrupted"] is True
    assert user["parent_id"] == result["id"] and answer["content"] == "Back on the build."
    request = fake_llm.chat_requests[-1]
    assert request.status == 200
    assert roles(request.messages) == ["system", "user", "assistant", "tool", "user"]


def test_a_call_already_followed_by_other_records_is_left_as_it_is(
    make_web: Callable[..., Web], fake_llm: FakeLLM, tmp_path: Path
) -> None:
    """A history an older version wrote on after a cut call: a result appended now could not
    come before what follows it, so none is; the request stands in a placeholder."""
    conversation = ConversationStore(tmp_path / "data").create(title="written on")
    conversation.append("user", "build it")
    conversation.append("assistant", "", tool_calls=[run_call("call-1")])
    conversation.append("user", "and then?")
    conversation.append("assistant", "It stopped.")
    client = make_web().connect()
    shown = client.call("get_conversation", {"conversation_id": conversation.id})["messages"]
    assert roles(shown) == ["user", "assistant", "user", "assistant"]
    fake_llm.script(Reply(content="On we go."))
    client.send("go on", conversation.id)
    client.wait_done(conversation.id)
    assert roles(history(tmp_path / "data", conversation.id)) == ["user", "assistant"] * 3
    request = fake_llm.chat_requests[-1]
    assert request.status == 200
    assert request.messages[3] == {
        "role": "tool",
        "tool_call_id": "call-1",
        "content": MISSING_RESULT,
    }
