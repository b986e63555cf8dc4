"""Condensing the history: where a summary may cut, and the view the model is sent.

The property test builds random conversation trees (parallel calls, reasoning, results lost to
a cut stream or a cancel, plan prompts, branches) in a real store, condenses them at random
moments, and checks every request both strict fake flavours would get.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from history.condensed_view import (
    SUMMARY_HEADER,
    Cut,
    ViewCache,
    active_summary,
    condensed_ids,
    is_turn_start,
    model_view,
    plan_cut,
    summary_meta,
    summary_request,
)
from history.context_builder import ContextBuilder
from history.conversation import Conversation
from history.store import ConversationStore
from model.messages import ChatMessage
from model.providers import prepare_messages, resolve_provider
from protocol.records import MessageMeta, MessageRecord, ToolCallRecord
from tests.fake_llm.flavours import FLAVOURS
from tests.fake_llm.validation import validate_chat
from tests.kit.settings import make_settings

CONFIGS = {
    name: resolve_provider(make_settings(provider=name, api_key="k"))
    for name in ("deepseek", "kimi")
}

# --- building conversations ------------------------------------------------------------------

group = st.fixed_dictionaries(
    {
        "calls": st.integers(0, 3),
        "reasoning": st.booleans(),
        "text": st.integers(0, 400),
        "lost": st.integers(0, 3),  # results never recorded at the end of the batch (cut, cancel)
    }
)
turn = st.fixed_dictionaries(
    {
        "op": st.just("turn"),
        "text": st.integers(1, 600),
        "groups": st.lists(group, max_size=4),
        "answer": st.booleans(),
        "cut_stream": st.booleans(),  # an answer interrupted mid-stream, kept as a partial record
        "plan_steps": st.integers(0, 2),
        "branch_back": st.integers(0, 3),  # hang the turn this many user turns further up
    }
)
condense = st.fixed_dictionaries({"op": st.just("condense"), "keep": st.integers(0, 3000)})
operations = st.lists(st.one_of(turn, turn, condense), min_size=1, max_size=14)


class Builder:
    """Appends records the way the agent loop does, with unique tool-call ids."""

    def __init__(self, conversation: Conversation) -> None:
        self.conversation = conversation
        self.calls = 0

    def turn(self, op: dict[str, Any]) -> None:
        parent = self._branch_parent(op["branch_back"])
        self.conversation.append("user", "u" * op["text"], parent_id=parent)
        for number in range(op["plan_steps"]):
            self.conversation.append("user", f"Step {number + 1}", meta={"plan_step": number + 1})
            self._groups(op["groups"][:1])
        self._groups(op["groups"])
        if op["cut_stream"]:
            self.conversation.append(
                "assistant",
                "partial",
                reasoning_content="half a thought",
                meta={"interrupted": "stream_cut"},
            )
        elif op["answer"]:
            self.conversation.append("assistant", "final " * 20)

    def _groups(self, groups: list[dict[str, Any]]) -> None:
        for spec in groups:
            calls: list[ToolCallRecord] = []
            for _ in range(spec["calls"]):
                self.calls += 1
                calls.append(
                    {
                        "id": f"functions.read_file:{self.calls}",
                        "type": "function",
                        "function": {
                            "name": "read_file",
                            "arguments": json.dumps({"path": f"f{self.calls}"}),
                        },
                    }
                )
            self.conversation.append(
                "assistant",
                "a" * spec["text"],
                tool_calls=calls or None,
                reasoning_content="why " * 10 if spec["reasoning"] else None,
            )
            answered = calls[: max(0, len(calls) - spec["lost"])] if spec is groups[-1] else calls
            for call in answered:
                self.conversation.append(
                    "tool", "t" * 300, tool_call_id=call["id"], name="read_file", meta={"ok": True}
                )

    def _branch_parent(self, back: int) -> Any:
        if not back:
            from history.conversation import LEAF

            return LEAF
        users = [r for r in self.conversation.path() if is_turn_start(r)]
        return users[-back].get("parent_id") if len(users) > back else None

    def condense(self, keep: int) -> bool:
        path = self.conversation.path()
        cut = plan_cut(path, keep_tokens=keep)
        if cut is None:
            return False
        self.conversation.append(
            "system",
            f"summary of {len(cut.replaced)} records",
            meta=summary_meta_for(cut),
        )
        return True


def summary_meta_for(cut: Cut) -> MessageMeta:
    """The meta of a summary record for `cut` (its trigger and token counts are not read here)."""
    return {
        "summary": {
            "first_kept_id": cut.first_kept["id"],
            "summarized": len(cut.replaced),
            "trigger": "threshold",
            "tokens_before": 0,
            "tokens_after": 0,
        }
    }


def reasoning_calls(conversation: Conversation) -> set[tuple[str, str]]:
    """The calls the model made with reasoning: the strict fakes refuse them without it."""
    return {
        (call["id"], call["function"]["arguments"])
        for r in conversation.records
        if r.get("reasoning_content")
        for call in r.get("tool_calls") or ()
    }


def request_body(messages: Sequence[ChatMessage], flavour: str) -> dict[str, Any]:
    return {
        "model": FLAVOURS[flavour].models[0],
        "stream": True,
        "messages": prepare_messages(messages, CONFIGS[flavour]),
    }


def check_view(
    path: list[MessageRecord],
    conversation: Conversation,
    builder: ContextBuilder,
    views: ViewCache,
) -> None:
    """Every rule a condensed request must keep, for the view of one path."""
    view = views.view(path, lambda record: record, None)
    assert view == list(model_view(path)), "a view grown with the path is the path's view"
    built = builder.build("system prompt", view)
    assert built.dropped == 0
    fresh = ContextBuilder(10_000_000).build("system prompt", view)
    assert fresh.messages == built.messages, "a reused builder sends the same as a fresh one"
    for flavour in CONFIGS:
        validate_chat(
            request_body(built.messages, flavour), FLAVOURS[flavour], reasoning_calls(conversation)
        )

    active = active_summary(path)
    if active is None:
        assert view == [r for r in path if summary_meta(r) is None]
        return
    first_kept = path[active.cut]
    assert is_turn_start(first_kept), "a cut falls only before a user's own message"
    assert view[0] is path[0], "the first user message is kept"
    summary = view[1]["content"]
    assert isinstance(summary, str)  # summary_message's content is text
    assert view[1]["role"] == "user" and summary.startswith(SUMMARY_HEADER)
    assert view[2:] == [r for r in path[active.cut :] if summary_meta(r) is None]
    newest_turn = max(i for i, r in enumerate(path) if is_turn_start(r))
    assert newest_turn >= active.cut, "the newest turn is never summarised"
    assert condensed_ids(path) == {r["id"] for r in path[1 : active.cut] if not summary_meta(r)}

    # Every kept assistant message goes out exactly as it would without the summary.
    uncondensed = ContextBuilder(10_000_000).build(
        "system prompt", [r for r in path if summary_meta(r) is None]
    )
    for flavour in CONFIGS:
        plain = dict(
            zip(
                [m.get("id") for m in uncondensed.messages],
                prepare_messages(uncondensed.messages, CONFIGS[flavour]),
                strict=True,
            )
        )
        sent = prepare_messages(built.messages, CONFIGS[flavour])
        for record, message in zip(built.messages, sent, strict=True):
            if record["role"] == "assistant":
                assert json.dumps(message) == json.dumps(plain[record["id"]])
                if record.get("reasoning_content") and record.get("tool_calls"):
                    assert message["reasoning_content"] == record["reasoning_content"]


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(operations)
def test_condensed_requests_keep_every_provider_rule(ops: list[dict[str, Any]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        conversation = ConversationStore(Path(tmp)).create()
        builder = Builder(conversation)
        context, views = ContextBuilder(10_000_000), ViewCache()
        for op in ops:
            if op["op"] == "turn":
                builder.turn(op)
            else:
                builder.condense(op["keep"])
            check_view(conversation.path(), conversation, context, views)
        for leaf in {r["id"] for r in conversation.records if not conversation.children(r["id"])}:
            check_view(conversation.path(leaf), conversation, ContextBuilder(10_000_000), views)


# --- the cut, one rule at a time ---------------------------------------------------------------


def _conversation(tmp_path: Path, turns: int, size: int = 400) -> Conversation:
    conversation = ConversationStore(tmp_path).create()
    for number in range(turns):
        conversation.append("user", f"turn {number} " + "u" * size)
        calls: list[ToolCallRecord] = [
            {
                "id": f"call_{number}_{i}",
                "type": "function",
                "function": {"name": "list_files", "arguments": "{}"},
            }
            for i in range(2)
        ]
        conversation.append("assistant", "", tool_calls=calls, reasoning_content="thinking")
        for call in calls:
            conversation.append("tool", "x" * size, tool_call_id=call["id"])
        conversation.append("assistant", f"answer {number}")
    return conversation


def test_the_first_message_and_the_newest_turn_are_always_kept(tmp_path: Path) -> None:
    assert plan_cut(_conversation(tmp_path / "a", 1).path(), keep_tokens=0) is None
    cut = plan_cut(_conversation(tmp_path / "b", 2).path(), keep_tokens=0)
    assert cut is not None and cut.first_kept["content"].startswith("turn 1")
    assert [r["role"] for r in cut.replaced] == ["assistant", "tool", "tool", "assistant"]
    cut = plan_cut(_conversation(tmp_path / "c", 3).path(), keep_tokens=0)
    assert cut is not None and cut.first_kept["content"].startswith("turn 2")
    assert [r["role"] for r in cut.replaced] == [
        "assistant",
        "tool",
        "tool",
        "assistant",
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
    ]


def test_the_cut_keeps_as_many_recent_turns_as_fit(tmp_path: Path) -> None:
    path = _conversation(tmp_path, 8).path()
    per_turn = sum(_tokens(r) for r in path[:5])
    cut = plan_cut(path, keep_tokens=per_turn * 3.5)
    assert cut is not None and cut.first_kept["content"].startswith("turn 5")
    smallest = plan_cut(path, keep_tokens=10**9)  # everything fits: the least there is to do
    assert smallest is not None and smallest.first_kept["content"].startswith("turn 1")


def test_plan_prompts_are_not_cut_points(tmp_path: Path) -> None:
    conversation = _conversation(tmp_path, 2)
    conversation.append("user", "Step 1", meta={"plan_step": 1})
    conversation.append("assistant", "did step 1")
    cut = plan_cut(conversation.path(), keep_tokens=0)
    assert cut is not None and cut.first_kept["content"].startswith("turn 1")


def test_a_second_summary_takes_over_from_the_first(tmp_path: Path) -> None:
    conversation = _conversation(tmp_path, 4)
    first = plan_cut(conversation.path(), keep_tokens=0)
    assert first is not None
    conversation.append(
        "system",
        "S1",
        meta=summary_meta_for(first),
    )
    assert plan_cut(conversation.path(), keep_tokens=0) is None  # only the newest turn is left
    for number in (4, 5):
        conversation.append("user", f"turn {number}")
        conversation.append("assistant", f"answer {number}")
    second = plan_cut(conversation.path(), keep_tokens=0)
    assert second is not None and second.previous is not None
    assert second.previous["content"] == "S1"
    assert second.replaced[0] is first.first_kept  # it starts where the first one stopped
    messages = summary_request(
        conversation.path(), second, instructions="keep the numbers", max_chars=100_000
    )
    text = messages[1]["content"]
    assert "S1" in text and "keep the numbers" in text and "turn 3" in text
    assert "turn 5" not in text  # the newest turn is kept, not summarised
    assert all(m["role"] in ("system", "user") for m in messages)


def test_the_summary_request_stays_within_its_size(tmp_path: Path) -> None:
    conversation = _conversation(tmp_path, 30, size=3000)
    cut = plan_cut(conversation.path(), keep_tokens=0)
    assert cut is not None
    text = summary_request(conversation.path(), cut, instructions=None, max_chars=20_000)[1]
    assert len(text["content"]) < 30_000
    assert "older messages left out" in text["content"]
    assert "turn 28" in text["content"]  # the newest replaced turns are the ones kept


def _tokens(record: ChatMessage) -> float:
    from history.context_builder import estimate_message_tokens

    return estimate_message_tokens(record)
