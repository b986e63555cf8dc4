"""The web server in-process: every Socket.IO event and its ack (threading mode)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest

from tests.fake_llm import Call, FakeLLM, Reply
from tests.kit.clients import Web
from tests.kit.events import Received, payloads
from tests.kit.settings import TOKEN

# --- connect ---------------------------------------------------------------------------


@pytest.mark.parametrize("token", [None, "", "wrong", "é-not-ascii", TOKEN + "x"])
def test_connect_without_the_right_token_is_refused(web: Web, token: str | None):
    assert not web.connect(token).client.is_connected()


def test_connect_with_the_token_is_accepted(web: Web):
    assert web.connect().client.is_connected()


# --- send_message ----------------------------------------------------------------------


def test_send_message_streams_one_token_event_per_delta(web: Web, fake_llm: FakeLLM):
    text = "Hello there, streaming world!"
    fake_llm.script(Reply(content=text, chunk_size=3))
    client = web.connect()
    ack = client.call("send_message", {"conversation_id": None, "text": "hi"})
    assert ack["ok"] and ack["conversation_id"] and ack["message_id"]
    events = client.wait_done(ack["conversation_id"])
    assert [e.payload["seq"] for e in events] == list(range(1, len(events) + 1))
    tokens = [e.payload for e in events if e.name == "token"]
    assert len(tokens) == len(range(0, len(text), 3))
    assert "".join(t["text"] for t in tokens) == text
    assert events[-1].name == "done" and events[-1].payload["reason"] == "complete"
    assert {"prompt_tokens", "completion_tokens"} <= set(events[-1].payload["usage"])
    status = [e.payload for e in events if e.name == "status"]
    assert status[0]["state"] == "thinking" and status[-1]["state"] == "idle"
    assert {"used_tokens", "limit_tokens"} <= set(status[0]["context"])


def test_a_second_task_continues_the_seq_and_the_history(web: Web, fake_llm: FakeLLM):
    fake_llm.script(Reply(content="first"), Reply(content="second"))
    client = web.connect()
    cid = client.send("one")
    first = client.wait_done(cid)
    assert client.send("two", cid) == cid
    second = client.wait_done(cid)
    assert second[0].payload["seq"] == first[-1].payload["seq"] + 1
    assert fake_llm.chat_requests[-1].last_user_text == "two"
    assert [m["content"] for m in fake_llm.chat_requests[-1].messages[1:]] == [
        "one",
        "first",
        "two",
    ]


BAD_PAYLOADS: list[Any] = [
    {},
    {"text": ""},
    {"text": 5},
    {"text": "x", "mode": "slow"},
    {"text": "x", "approval": "yes"},
    {"text": "x", "conversation_id": 7},
    "just a string",
    ["a", "list"],
    42,
    {"text": "x" * 200_001},
]


@pytest.mark.parametrize("payload", BAD_PAYLOADS)
def test_send_message_bad_payloads_fail_cleanly(web: Web, payload: Any):
    client = web.connect()
    ack = client.call("send_message", payload)
    assert ack["ok"] is False and ack["error"]["code"] == "bad_request"
    assert isinstance(ack["error"]["message"], str) and ack["error"]["message"]
    assert client.call("get_status", {})["ok"] is True
    assert not web.state.hub.running()


@pytest.mark.parametrize(
    "event, payload",
    [
        ("cancel", {}),
        ("cancel", {"conversation_id": ["x"]}),
        ("approve", {"conversation_id": "c", "approved": True}),
        ("approve", {"conversation_id": "c", "call_id": "k", "approved": "maybe"}),
        ("join", {"after_seq": 3}),
        ("join", {"conversation_id": "c", "after_seq": "soon"}),
        ("get_conversation", {"conversation_id": None}),
        ("get_conversation", "c"),
        ("list_conversations", ["not", "an", "object"]),
        ("get_file_tree", 3),
    ],
)
def test_every_event_rejects_bad_payloads(web: Web, event: str, payload: Any):
    client = web.connect()
    ack = client.call(event, payload)
    assert ack["ok"] is False and ack["error"]["code"] == "bad_request", ack
    assert client.call("list_conversations", {})["ok"] is True


def test_extra_arguments_and_missing_payloads(web: Web):
    client = web.connect()
    two = client.client.emit("get_status", {}, {}, callback=True)
    assert two["ok"] is False and two["error"]["code"] == "bad_request"
    assert client.client.emit("get_status", callback=True)["ok"] is True
    assert client.client.emit("list_conversations", None, callback=True)["ok"] is True


def test_busy_second_send_message_then_cancel(web: Web, fake_llm: FakeLLM):
    fake_llm.script(Reply(content="x" * 400, chunk_size=1, delay=0.02))
    client = web.connect()
    cid = client.send("slow please", approval="ask")
    client.wait_for("token")
    busy = client.call(
        "send_message", {"conversation_id": cid, "text": "again", "approval": "auto"}
    )
    assert busy["ok"] is False and busy["error"]["code"] == "busy"
    assert web.state.hub.get(cid).approval == "ask"
    started = time.monotonic()
    assert client.call("cancel", {"conversation_id": cid}) == {"ok": True}
    events = client.wait_done(cid)
    assert time.monotonic() - started < 2
    assert events[-1].payload["reason"] == "cancelled"
    again = client.call("cancel", {"conversation_id": cid})
    assert again["ok"] is False and again["error"]["code"] == "not_running"


@pytest.mark.parametrize(
    "event, payload",
    [
        ("send_message", {"conversation_id": "0123456789abcdef", "text": "hi"}),
        ("send_message", {"conversation_id": "../../etc", "text": "hi"}),
        ("cancel", {"conversation_id": "nope"}),
        ("approve", {"conversation_id": "nope", "call_id": "c1", "approved": True}),
        ("join", {"conversation_id": "nope"}),
        ("get_conversation", {"conversation_id": "nope"}),
    ],
)
def test_unknown_conversation_is_not_found(web: Web, event: str, payload: dict[str, Any]):
    client = web.connect()
    ack = client.call(event, payload)
    assert ack["ok"] is False and ack["error"]["code"] == "not_found", ack
    assert client.call("list_conversations", {}) == {"ok": True, "conversations": [], "running": []}


def test_an_unknown_agent_is_not_found_naming_the_agents(web: Web):
    client = web.connect()
    ack = client.call("send_message", {"conversation_id": None, "text": "hi", "agent": "nobody"})
    assert ack["ok"] is False and ack["error"]["code"] == "not_found", ack
    assert ack["error"]["message"].startswith("no agent 'nobody'; the agents are: ")
    assert "general" in ack["error"]["message"]
    assert client.call("list_conversations", {})["conversations"] == []


def test_not_configured_model_is_reported(make_web: Callable[..., Web]):
    web = make_web(api_key=None, base_url="http://127.0.0.1:9/v1", deepseek_api_key=None)
    ack = web.connect().call("send_message", {"conversation_id": None, "text": "hi"})
    assert ack["ok"] is False and ack["error"]["code"] == "not_configured"
    assert "API key" in ack["error"]["message"]


def test_branch_hangs_under_the_given_parent(web: Web, fake_llm: FakeLLM):
    fake_llm.script(Reply(content="a1"), Reply(content="b1"), Reply(content="b1 again"))
    client = web.connect()
    cid = client.send("q1")
    client.wait_done(cid)
    client.send("q2", cid)
    client.wait_done(cid)
    first_answer = client.call("get_conversation", {"conversation_id": cid})["messages"][1]
    client.clear()
    branch = client.call(
        "send_message",
        {"conversation_id": cid, "text": "q2 edited", "parent_id": first_answer["id"]},
    )
    assert branch["ok"], branch
    client.wait_done(cid)
    messages = client.call("get_conversation", {"conversation_id": cid})["messages"]
    edited = next(m for m in messages if m["id"] == branch["message_id"])
    assert edited["parent_id"] == first_answer["id"] and edited["version"] == 2
    sent = [m["content"] for m in fake_llm.chat_requests[-1].messages[1:]]
    assert sent == ["q1", "a1", "q2 edited"]
    bad = client.call(
        "send_message", {"conversation_id": cid, "text": "x", "parent_id": "no-such-message"}
    )
    assert bad["ok"] is False and bad["error"]["code"] == "not_found"


def test_explicit_null_parent_starts_a_new_root(web: Web, fake_llm: FakeLLM):
    fake_llm.script(Reply(content="a1"), Reply(content="a1 again"))
    client = web.connect()
    first = client.call("send_message", {"conversation_id": None, "text": "q1"})
    cid = first["conversation_id"]
    client.wait_done(cid)
    client.clear()
    edited = client.call(
        "send_message", {"conversation_id": cid, "text": "q1 edited", "parent_id": None}
    )
    assert edited["ok"], edited
    client.wait_done(cid)
    messages = client.call("get_conversation", {"conversation_id": cid})["messages"]
    record = next(m for m in messages if m["id"] == edited["message_id"])
    assert record["parent_id"] is None and record["version"] == 2
    assert [m["content"] for m in fake_llm.chat_requests[-1].messages[1:]] == ["q1 edited"]


# --- approval --------------------------------------------------------------------------


def _approval_run(web: Web, fake_llm: FakeLLM, approved: bool) -> list[Received]:
    fake_llm.script(
        Reply(tool_calls=[Call("run_command", {"command": "echo hi > out.txt"})]),
        Reply(content="finished"),
    )
    client = web.connect()
    cid = client.send("make out.txt")
    asked = client.wait_for("tool", phase="approval")
    assert asked["name"] == "run_command" and "echo hi" in asked["preview"]
    # (The declined run shows after `done` that nothing runs without an answer.)
    assert not (web.workspace / "out.txt").exists()
    wrong = client.call("approve", {"conversation_id": cid, "call_id": "other", "approved": True})
    assert wrong["ok"] is False and wrong["error"]["code"] == "not_waiting"
    ack = client.call(
        "approve", {"conversation_id": cid, "call_id": asked["call_id"], "approved": approved}
    )
    assert ack == {"ok": True, "always_allowed": []}
    return client.wait_done(cid)


def test_ask_mode_approved_command_runs(make_web: Callable[..., Web], fake_llm: FakeLLM):
    web = make_web(approval="ask")
    events = _approval_run(web, fake_llm, approved=True)
    [result] = payloads(events, "tool", phase="result")
    assert result["ok"] is True and "declined" not in result
    assert (web.workspace / "out.txt").read_text() == "hi\n"
    assert events[-1].payload["reason"] == "complete"


def test_ask_mode_rejected_command_is_declined(make_web: Callable[..., Web], fake_llm: FakeLLM):
    web = make_web(approval="ask")
    events = _approval_run(web, fake_llm, approved=False)
    [result] = payloads(events, "tool", phase="result")
    assert result["ok"] is False and "declined" in result["output"]
    assert result["declined"] is True  # what the page reads, not the text
    assert not (web.workspace / "out.txt").exists()
    assert events[-1].payload["reason"] == "complete"
    cid = events[-1].payload["conversation_id"]
    ack = web.connect().call("get_conversation", {"conversation_id": cid})
    [record] = [m for m in ack["messages"] if m["role"] == "tool"]
    assert record["meta"] == {"ok": False, "duration_ms": 0, "declined": True}


def test_approve_bad_payload(web: Web):
    ack = web.connect().call("approve", {"conversation_id": "x", "call_id": "c"})
    assert ack["ok"] is False and ack["error"]["code"] == "bad_request"


# --- join ------------------------------------------------------------------------------


def test_join_replays_the_last_task_after_seq(web: Web, fake_llm: FakeLLM):
    fake_llm.script(Reply(content="abcdefghij", chunk_size=2))
    sender = web.connect()
    cid = sender.send("go")
    original = sender.wait_done(cid)
    other = web.connect()
    ack = other.call("join", {"conversation_id": cid, "after_seq": 3})
    assert ack["ok"] is True
    replayed = [(e.name, e.payload) for e in other.of(cid)]
    assert replayed == [(e.name, e.payload) for e in original if e.payload["seq"] > 3]
    everything = web.connect()
    everything.call("join", {"conversation_id": cid})
    assert len(everything.received()) == len(original)


def test_join_while_running_gets_the_rest_live_without_gap_or_duplicate(
    web: Web, fake_llm: FakeLLM
):
    fake_llm.script(Reply(content="y" * 120, chunk_size=1, delay=0.005))
    sender = web.connect()
    cid = sender.send("go")
    sender.wait_until(
        lambda events: any(e.name == "token" and e.payload["seq"] >= 10 for e in events),
        what="token #10",
    )
    late = web.connect()
    assert late.call("join", {"conversation_id": cid, "after_seq": 5})["ok"]
    seen = late.wait_done(cid)
    last = sender.wait_done(cid)[-1].payload["seq"]
    assert [e.payload["seq"] for e in seen] == list(range(6, last + 1))


# --- reading calls ---------------------------------------------------------------------


def test_list_and_get_conversation(web: Web, fake_llm: FakeLLM):
    fake_llm.script(Reply(content="the answer"))
    client = web.connect()
    cid = client.send("Question about things")
    client.wait_done(cid)
    listed = client.call("list_conversations", {})
    assert listed["ok"] is True
    assert [c["id"] for c in listed["conversations"]] == [cid]
    assert set(listed["conversations"][0]) == {"id", "title", "created_at", "updated_at", "tasks"}
    got = client.call("get_conversation", {"conversation_id": cid})
    assert got["ok"] and got["conversation"]["id"] == cid
    assert [(m["role"], m["content"]) for m in got["messages"]] == [
        ("user", "Question about things"),
        ("assistant", "the answer"),
    ]
    assert all(not k.startswith("_") for m in got["messages"] for k in m)


def test_get_file_tree_and_status(web: Web):
    (web.workspace / "src").mkdir()
    (web.workspace / "src" / "app.py").write_text("print(1)\n")
    (web.workspace / "README.md").write_text("# hi\n")
    client = web.connect()
    ack = client.call("get_file_tree", {})
    assert ack["ok"] and ack["tree"]["path"] == "" and ack["tree"]["is_dir"]
    top = {c["path"]: c for c in ack["tree"]["children"]}
    assert set(top) == {"src", "README.md"}
    assert top["src"]["children"][0]["path"] == "src/app.py"
    status = client.call("get_status", {})
    assert status["ok"] and status["provider"] == "deepseek" and status["model"]
    assert status["mode"] == "fast" and status["approval"] == "auto"
    assert status["async_mode"] == "threading"
    assert status["sandbox"]["kind"] in {"docker", "bubblewrap", "local"}
    assert isinstance(status["sandbox"]["isolation"], list)
    assert TOKEN not in json.dumps(status)
