"""protocol/events.py: what `to_wire` sends, `parse_event` reads back as the same event, for
every event with every field set; a newer server's extra field is left out, and what does
not fit comes as `Unknown`, never as an exception."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from protocol import events
from protocol.event_values import ContextUsage, FileChange, FolderRefresh, Money, Usage
from protocol.events import (
    ContextEvent,
    ConversationUpdate,
    Done,
    Error,
    Event,
    FileTree,
    Notice,
    PlanEvent,
    Process,
    Status,
    Thinking,
    Token,
    ToolEvent,
    Unknown,
    UserMessage,
    done_from_wire,
    expand_deltas,
    parse_event,
)
from protocol.records import AttachmentMeta

STAMP: dict[str, Any] = {
    "conversation_id": "c1",
    "seq": 7,
    "agent": "coder",
    "parent_call_id": "call_0",
    "depth": 1,
}

# One of each event the wire carries, every field set (Unknown is the decoder's own).
ATTACHED: AttachmentMeta = {
    "path": ".uploads/a.txt",
    "name": "a.txt",
    "size": 3,
    "kind": "text",
    "sha256": "ab",
    "chars": 3,
    "truncated": False,
    "note": "",
    "mime": "text/plain",
}
SAMPLES: list[Event] = [
    UserMessage(
        "m0", "Hello", "m-1", mode="thinking", skill="review", attachments=[ATTACHED], **STAMP
    ),
    Token("m1", "Hel", **STAMP),
    Thinking("m1", "hmm", **STAMP),
    ToolEvent(
        "call_1",
        "run_command",
        "result",
        delta="out",
        arguments={"command": "ls"},
        preview="ls",
        warnings=["a control character"],
        ok=True,
        output="a.txt",
        duration_ms=12,
        details={"exit_code": 0},
        **STAMP,
    ),
    Status("tool", 2, ContextUsage(1200, 64000), usage={"prompt_tokens": 3}, **STAMP),
    PlanEvent(
        "step_finished",
        {"revision": 1, "steps": [{"index": 0, "title": "Read", "status": "done"}]},
        step=0,
        status="done",
        summary="read it",
        reason="because",
        **STAMP,
    ),
    ContextEvent(
        "condensed",
        "user",
        9000,
        64000,
        tokens_after=800,
        message_id="m9",
        first_kept_id="m5",
        summarized=4,
        summary="so far",
        message="done",
        **STAMP,
    ),
    Notice("retry", "trying again in 2 s", seconds=2.0, **STAMP),
    Error("api_error", "the model server said no", **STAMP),
    Done(
        "budget",
        Usage(1000, 200, estimated=True, cached_prompt_tokens=400),
        cost=Money(0.0123, "USD"),
        budget={"scope": "task", "limit": {"amount": 1, "unit": "USD"}},
        **STAMP,
    ),
    FileTree(
        [FileChange("moved", "a.txt", is_dir=False, dest_path="b.txt")],
        refresh=[FolderRefresh("build", 900)],
        **STAMP,
    ),
    ConversationUpdate(id="c1", running=False, title="A title", deleted=True),
    Process(
        process_id="p1",
        phase="started",
        command="make serve",
        pid=7,
        origin="agent",
        ports=[],
        **STAMP,
    ),
    Process(process_id="p1", phase="output", delta="ready\n", offset=10, skipped=10, **STAMP),
    Process(process_id="p1", phase="exited", exit_code=None, signal=15, reason="stopped", **STAMP),
]


def test_the_samples_cover_every_event() -> None:
    defined = {
        cls
        for cls in vars(events).values()
        if isinstance(cls, type) and issubclass(cls, Event) and cls.name
    }
    assert defined - {Unknown} == {type(sample) for sample in SAMPLES}


@pytest.mark.parametrize("event", SAMPLES, ids=lambda event: event.name)
def test_an_event_reads_back_as_it_was_sent(event: Event) -> None:
    wire = json.loads(json.dumps(event.to_wire()))  # as a transport carries it
    assert parse_event(event.name, wire) == event


def test_what_a_newer_server_adds_is_left_out() -> None:
    wire = {**Token("m1", "x", seq=1).to_wire(), "colour": "blue"}
    assert parse_event("token", wire) == Token("m1", "x", seq=1)
    usage = {"prompt_tokens": 1, "completion_tokens": 2, "cost": None, "carbon": 3}
    assert parse_event("done", {"reason": "complete", "usage": usage}) == Done(
        "complete", Usage(1, 2)
    )


@pytest.mark.parametrize(
    ("name", "payload"),
    [
        ("token", {"text": "no message id"}),
        ("tool", {"name": "run_command", "phase": "start"}),
        ("file_tree", {"changes": "not a list of changes"}),
        ("file_tree", {"changes": [], "refresh": [["build", 900]]}),
        ("status", {"state": "idle", "iteration": 1, "context": {"used_tokens": 1}}),
        ("done", ["not", "an", "object"]),
        ("a_newer_event", {"anything": True}),
    ],
)
def test_what_does_not_fit_comes_as_unknown(name: str, payload: Any) -> None:
    assert parse_event(name, payload) == Unknown(event=name, payload=payload)


def test_a_cost_that_is_no_cost_is_unknown_and_a_task_end_reads_as_done() -> None:
    end = {"reason": "complete", "usage": {"prompt_tokens": 5, "completion_tokens": 1}}
    assert done_from_wire({**end, "conversation_id": "c1"}) == Done(
        "complete", Usage(5, 1), conversation_id="c1"
    )
    end["usage"]["cost"] = {"amount": "a lot", "currency": "USD"}  # type: ignore[index]
    assert done_from_wire(end).cost is None


def test_gathered_deltas_are_one_event_each_in_seq_order() -> None:
    wire = {
        "conversation_id": "c1",
        "of": "thinking",
        "message_id": "m1",
        "agent": "coder",
        "first_seq": 4,
        "seq": 6,
        "texts": ["a", "b", "c"],
    }
    assert expand_deltas(wire) == [
        Thinking("m1", text, conversation_id="c1", seq=seq, agent="coder")
        for seq, text in zip((4, 5, 6), "abc", strict=True)
    ]


def test_the_token_fast_path_sends_what_the_general_one_would() -> None:
    for delta in (Token("m1", "x", **STAMP), Thinking("m1", "y", seq=3)):
        general = {k: v for k, v in dataclasses.asdict(delta).items() if v is not None}
        assert delta.to_wire() == general


def test_a_user_message_that_starts_the_conversation_says_its_parent_is_null():
    wire = UserMessage("m0", "Hello", None, **STAMP).to_wire()
    assert wire["parent_id"] is None  # a root, not a field left out
    parsed = parse_event("user_message", json.loads(json.dumps(wire)))
    assert isinstance(parsed, UserMessage) and parsed.parent_id is None
