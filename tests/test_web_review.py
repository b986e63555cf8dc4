"""Undo and reviewed edits over Socket.IO: undo_task (with conflicts, also through the real
server), apply_edit, discard_edit, list_edits."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fake_llm import Call, FakeLLM, Reply
from tests.kit.clients import Web, connected
from tests.kit.events import payloads
from tests.kit.server import ServerProcess


def test_undo_task_puts_the_workspace_back_and_reports_the_paths(web: Web, fake_llm: FakeLLM):
    (web.workspace / "keep.txt").write_text("original\n")
    fake_llm.script(
        Reply(
            tool_calls=[
                Call("create_file", {"path": "new/made.txt", "content": "x"}),
                Call("modify_file", {"path": "keep.txt", "operation": "clear"}),
            ]
        ),
        Reply(content="done"),
    )
    client = web.connect()
    cid = client.send("change things")
    client.wait_done(cid)
    user_id = client.call("get_conversation", {"conversation_id": cid})["messages"][0]["id"]
    assert client.call("get_conversation", {"conversation_id": cid})["undoable"] == [user_id]

    ack = client.call("undo_task", {"conversation_id": cid})
    assert ack["ok"] and set(ack["restored"]) >= {"keep.txt", "new/made.txt"}, ack
    assert (web.workspace / "keep.txt").read_text() == "original\n"
    assert not (web.workspace / "new" / "made.txt").exists()
    tree_events = [p for p in client.named("file_tree") if "seq" not in p]
    assert any(c["path"] == "keep.txt" for e in tree_events for c in e["changes"])
    assert client.call("get_conversation", {"conversation_id": cid})["undoable"] == []
    again = client.call("undo_task", {"conversation_id": cid, "message_id": user_id})
    assert again["ok"] and again["restored"] == [] and "already undone" in again["message"]


def test_undo_is_refused_while_a_task_runs(web: Web, fake_llm: FakeLLM):
    fake_llm.script(Reply(content="slow " * 200, chunk_size=5, delay=0.02))
    client = web.connect()
    cid = client.send("talk")
    ack = client.call("undo_task", {"conversation_id": cid})
    assert ack == {"ok": False, "error": {"code": "busy", "message": ack["error"]["message"]}}
    client.call("cancel", {"conversation_id": cid})
    client.wait_done(cid)


def test_a_proposed_edit_is_listed_then_applied_or_discarded(web: Web, fake_llm: FakeLLM):
    (web.workspace / "a.py").write_text("a = 1\n")
    fake_llm.script(
        Reply(
            tool_calls=[
                Call("propose_edit", {"path": "a.py", "new_content": "a = 2\n"}),
                Call("propose_edit", {"path": "b.py", "new_content": "b = 1\n"}),
            ]
        ),
        Reply(content="please review"),
    )
    client = web.connect()
    cid = client.send("propose")
    events = client.wait_done(cid)
    proposals = [p["details"]["proposal"] for p in payloads(events, "tool", phase="result")]
    listed = client.call("list_edits", {"conversation_id": cid})["edits"]
    assert [e["id"] for e in listed] == [p["id"] for p in proposals]
    assert (web.workspace / "a.py").read_text() == "a = 1\n"

    applied = client.call("apply_edit", {"conversation_id": cid, "proposal_id": proposals[0]["id"]})
    assert applied["ok"] and applied["change"]["path"] == "a.py", applied
    assert (web.workspace / "a.py").read_text() == "a = 2\n"
    discarded = client.call(
        "discard_edit", {"conversation_id": cid, "proposal_id": proposals[1]["id"]}
    )
    assert discarded == {"ok": True}
    assert not (web.workspace / "b.py").exists()
    assert client.call("list_edits", {"conversation_id": cid})["edits"] == []
    gone = client.call("apply_edit", {"conversation_id": cid, "proposal_id": proposals[1]["id"]})
    assert gone["ok"] is False and gone["error"]["code"] == "not_found"


def test_an_edit_is_refused_when_the_file_changed_or_belongs_elsewhere(web: Web, fake_llm):
    (web.workspace / "a.py").write_text("a = 1\n")
    fake_llm.script(
        Reply(tool_calls=[Call("propose_edit", {"path": "a.py", "new_content": "a = 2\n"})]),
        Reply(content="ok"),
        Reply(content="another conversation"),
    )
    client = web.connect()
    cid = client.send("propose")
    events = client.wait_done(cid)
    proposal_id = next(
        p["details"]["proposal"]["id"] for p in payloads(events, "tool", phase="result")
    )
    other = client.send("hello")
    client.wait_done(other)
    foreign = client.call("apply_edit", {"conversation_id": other, "proposal_id": proposal_id})
    assert foreign["error"]["code"] == "not_found"
    (web.workspace / "a.py").write_text("a = 99\n")
    conflict = client.call("apply_edit", {"conversation_id": cid, "proposal_id": proposal_id})
    assert conflict["ok"] is False and conflict["error"]["code"] == "conflict"
    assert (web.workspace / "a.py").read_text() == "a = 99\n"


@pytest.mark.e2e
def test_undo_over_the_real_server_leaves_the_users_later_edit_until_told(
    fake_llm: FakeLLM, tmp_path: Path
):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "shared.txt").write_text("before\n")
    fake_llm.script(
        Reply(
            tool_calls=[
                Call("modify_file", {"path": "shared.txt", "operation": "append", "content": "x"}),
                Call("run_command", {"command": "echo made > made.txt"}),
            ]
        ),
        Reply(content="done"),
    )
    server = ServerProcess(
        ws, tmp_path / "data", base_url=fake_llm.base_url, api_key=fake_llm.api_key
    )
    with server, connected(server.url) as client:
        cid = client.start("change things")
        client.wait_done(cid)
        user_id = client.call("get_conversation", {"conversation_id": cid})["undoable"][0]
        (ws / "shared.txt").write_text("the user's own work\n")

        preview = client.call("undo_preview", {"conversation_id": cid})
        assert preview["files"] == [{"path": "made.txt", "action": "remove"}]
        conflict = {"path": "shared.txt", "action": "restore", "reason": "changed since the task"}
        assert preview["conflicts"] == [conflict]
        ack = client.call("undo_task", {"conversation_id": cid})
        assert ack["ok"] and ack["restored"] == ack["removed"] == ["made.txt"], ack
        assert ack["conflicts"] == [conflict] and "left as they are" in ack["message"]
        assert (ws / "shared.txt").read_text() == "the user's own work\n"
        assert not (ws / "made.txt").exists()
        assert client.call("get_conversation", {"conversation_id": cid})["undoable"] == [user_id]

        refused = client.call("undo_task", {"conversation_id": cid, "overwrite": "yes"})
        assert refused["error"]["code"] == "bad_request"
        forced = client.call("undo_task", {"conversation_id": cid, "overwrite": ["shared.txt"]})
        assert forced["restored"] == ["shared.txt"] and forced["conflicts"] == [], forced
        assert (ws / "shared.txt").read_text() == "before\n"
        assert client.call("get_conversation", {"conversation_id": cid})["undoable"] == []
