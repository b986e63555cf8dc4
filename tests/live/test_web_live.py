"""The web front against the real server: a task's tokens, `done` and history, a follow-up, a
cancel mid-stream, a request over the server's window and a plan_execute task on forced tool
calls, each through a real Socket.IO client and `main.py web`."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.kit.clients import EventClient, assert_contiguous
from tests.kit.events import Received, text_of
from tests.kit.server import ServerProcess
from tests.live.servers import API_KEY, N_CTX, SETTINGS, RecordingProxy

pytestmark = pytest.mark.timeout(600)
ANSWER = 120  # seconds a short answer may take (prompt and all) on a loaded machine
# A plan_execute agent of the user's own (DATA_DIR/agents): none of the shipped ones plans.
PLANNER = """\
name: planner
description: Plans the task in steps, then does each one.
mode: plan_execute
tools: [list_files, read_file]
max_iterations: 3
"""


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, wire: RecordingProxy
) -> Iterator[ServerProcess]:
    """`main.py web` whose model is the real server (through the pass-through)."""
    root = tmp_path_factory.mktemp("web-live")
    (root / "ws").mkdir()
    (root / "ws" / "notes.txt").write_text("Buy bread.\nCall Ada.\n")
    (root / "data" / "agents").mkdir(parents=True)
    (root / "data" / "agents" / "planner.yaml").write_text(PLANNER)
    with ServerProcess(
        root / "ws", root / "data", base_url=wire.base_url, api_key=API_KEY, env=SETTINGS
    ) as process:
        yield process
        assert process.stop() == 0, process.stderr


def history(client: EventClient, conversation_id: str) -> list[dict[str, Any]]:
    ack = client.call("get_conversation", {"conversation_id": conversation_id})
    assert ack["ok"], ack
    return list(ack["messages"])


def answered(client: EventClient, conversation_id: str, count: int = 1) -> list[Received]:
    """The conversation's events once its `count`-th task completed, which it must have."""
    events = client.wait_done(conversation_id, ANSWER, count)
    done = client.dones(conversation_id)[count - 1]
    assert done["reason"] == "complete", (done, client.named("error"))
    return events


def test_a_task_streams_tokens_then_done_and_the_history_keeps_the_answer(
    client: EventClient,
) -> None:
    cid = client.start("Say hello in one short sentence.")
    events = answered(client, cid)
    assert_contiguous(events)
    names = [e.name for e in events]
    assert "token" in names
    assert max(i for i, name in enumerate(names) if name == "token") < names.index("done")
    text = text_of(events)
    assert text.strip()
    records = history(client, cid)
    assert [r["role"] for r in records] == ["user", "assistant"]
    assert records[-1]["content"] == text


def test_a_follow_up_sends_the_first_exchange_to_the_server(
    client: EventClient, wire: RecordingProxy
) -> None:
    cid = client.start("My name is Ada. Greet me.")
    first_answer = text_of(answered(client, cid))
    before = len(wire.chat_requests())
    client.start("What is my name?", cid)
    answered(client, cid, count=2)
    sent = wire.chat_requests()[before:]
    assert len(sent) == 1, sent
    messages = sent[0]["messages"]
    assert messages[0]["role"] == "system"
    assert [(m["role"], m["content"]) for m in messages[1:]] == [
        ("user", "My name is Ada. Greet me."),
        ("assistant", first_answer),
        ("user", "What is my name?"),
    ]
    records = history(client, cid)
    assert [r["role"] for r in records] == ["user", "assistant", "user", "assistant"]
    assert [r["parent_id"] for r in records[1:]] == [r["id"] for r in records[:-1]]


def test_a_cancel_mid_stream_keeps_what_arrived_and_the_conversation_goes_on(
    client: EventClient,
) -> None:
    cid = client.start("Write a long story about a dragon who learns to bake bread.")
    client.wait_for("token", ANSWER, conversation_id=cid)
    assert client.call("cancel", {"conversation_id": cid}) == {"ok": True}
    events = client.wait_done(cid, 30)
    assert client.dones(cid)[0]["reason"] == "cancelled"
    records = history(client, cid)
    assert [r["role"] for r in records] == ["user", "assistant"]
    assert records[-1]["meta"]["interrupted"] == "cancelled"
    assert records[-1]["content"] == text_of(events)

    client.start("Say yes.", cid)
    answered(client, cid, count=2)
    assert [r["role"] for r in history(client, cid)] == ["user", "assistant"] * 2


def test_a_message_over_the_servers_window_is_refused_clearly_and_it_keeps_serving(
    client: EventClient, wire: RecordingProxy
) -> None:
    """llama-cpp-python answers a streamed request over its window with 200 and an empty
    stream; asked again unstreamed, 400 `context_length_exceeded` with the sizes."""
    words = N_CTX + N_CTX // 2  # a token each at least: over the window, whatever else is sent
    before = len(wire.exchanges)
    cid = client.start("Count these: " + "word " * words)
    events = client.wait_done(cid, ANSWER)
    assert client.dones(cid)[0]["reason"] == "error"
    errors = [e.payload for e in events if e.name == "error"]
    assert [e["code"] for e in errors] == ["context_too_long"], errors
    assert str(N_CTX) in errors[0]["message"], errors
    assert not client.named("notice", conversation_id=cid, code="retrying")
    assert [e.status for e in wire.exchanges[before:]] == [200, 400]
    assert [r["role"] for r in history(client, cid)] == ["user"]

    other = client.start("Say yes.")
    assert text_of(answered(client, other)).strip()


def test_a_plan_execute_task_runs_its_plan_on_forced_tool_calls(
    client: EventClient, wire: RecordingProxy
) -> None:
    """make_plan, and finish_step where a step answered without it, are asked for by name in
    `tool_choice`, and the real server's streamed calls are assembled, recorded and answered.
    What a 135M model puts in them is its own affair (arguments that are no JSON have happened:
    the call's result says so and the plan is the request itself), and so is whether it judges
    its steps done: the plan ends complete or failed (plan_failed)."""
    before = len(wire.chat_requests())
    cid = client.start("Read notes.txt and tell me what it says.", agent="planner")
    events = client.wait_done(cid, 5 * ANSWER)
    sent = wire.chat_requests()[before:]
    assert sent[0]["tool_choice"] == named("make_plan")
    assert [t["function"]["name"] for t in sent[0]["tools"]] == ["make_plan"]

    records = history(client, cid)
    results = {r["tool_call_id"]: r for r in records if r["role"] == "tool"}
    answers = [r for r in records if r["role"] == "assistant"]
    asked = [r.get("tool_choice") for r in sent]
    assert len(answers) == len(asked), (answers, asked)
    for answer, choice in zip(answers, asked, strict=True):
        calls = answer.get("tool_calls", [])
        if choice is not None:  # forced: the server made exactly that call
            assert [c["function"]["name"] for c in calls] == [choice["function"]["name"]]
        for call in calls:  # each with an id, and its result recorded
            assert call["id"] and results[call["id"]]["content"], results

    plans = [e.payload for e in events if e.name == "plan"]
    assert plans[0]["phase"] == "created" and plans[-1]["phase"] == "finished", plans
    planned = results[answers[0]["tool_calls"][0]["id"]]
    if planned["meta"]["ok"]:
        steps = json.loads(answers[0]["tool_calls"][0]["function"]["arguments"])["steps"]
        assert [step["title"] for step in plans[0]["plan"]["steps"]] == steps
    started = [p["step"] for p in plans if p["phase"] == "step_started"]
    ended = [p["step"] for p in plans if p["phase"] == "step_finished"]
    assert started and started == ended, plans
    done = client.dones(cid)[0]
    errors = [e.payload["code"] for e in events if e.name == "error"]
    assert (done["reason"], errors) in (("complete", []), ("error", ["plan_failed"])), errors


def named(tool: str) -> dict[str, Any]:
    """`tool_choice` asking for a call of `tool`."""
    return {"type": "function", "function": {"name": tool}}
