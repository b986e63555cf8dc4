"""One way a message record is made (history/message_record.py): a stored record, a
sub-agent's kept in memory and a summary measured before it is stored have the same fields,
the same time stamp and the same place under their parent."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from core.task import MemoryTranscript
from history.message_record import message_record
from history.store import ConversationStore

STAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")  # §5: ISO-8601 UTC, with a Z


def test_a_stored_and_a_sub_agents_record_have_one_shape(tmp_path: Path) -> None:
    conversation = ConversationStore(tmp_path).create()
    stored = [
        conversation.append("user", "hi"),
        conversation.append("tool", "out", tool_call_id="c1", name="read_file", meta={"ok": True}),
    ]
    transcript = MemoryTranscript(conversation.id)
    kept = [
        transcript.append("user", "hi"),
        transcript.append("tool", "out", tool_call_id="c1", name="read_file", meta={"ok": True}),
    ]
    for mine, theirs in zip(stored, kept, strict=True):
        assert list(mine) == list(theirs)  # the same keys, in the same order
        assert STAMP.fullmatch(mine["created_at"]) and STAMP.fullmatch(theirs["created_at"])
        assert (mine["depth"], mine["version"], mine["meta"]) == (
            theirs["depth"],
            theirs["version"],
            theirs["meta"],
        )
    assert kept[1]["parent_id"] == kept[0]["id"] and stored[1]["parent_id"] == stored[0]["id"]


def test_a_record_under_a_parent_is_one_deeper_and_leaves_out_what_is_none() -> None:
    root = message_record("c", "user", "hi", parent=None)
    answer = message_record("c", "assistant", None, parent=root, version=2, tool_calls=None)
    assert (root["depth"], root["parent_id"], root["version"]) == (0, None, 1)
    assert (answer["depth"], answer["parent_id"], answer["version"]) == (1, root["id"], 2)
    assert answer["content"] == "" and "tool_calls" not in answer and answer["meta"] == {}


def test_a_record_refuses_an_unknown_role_and_the_fields_it_sets_itself() -> None:
    with pytest.raises(ValueError, match="unknown role"):
        message_record("c", "robot", "x", parent=None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="depth"):
        message_record("c", "user", "x", parent=None, depth=3)  # type: ignore[call-arg]
