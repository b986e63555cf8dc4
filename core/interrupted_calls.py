"""Results for the tool calls a stopped server process left without one.

docs/protocol.md §5: every call's result follows it on its branch before any other assistant or user
record. A process killed mid-call never wrote that result, so whoever next holds the
conversation appends one per such call (messages.jsonl is never rewritten), marked
`meta.interrupted`, at the end of the path where the call is.
"""

from __future__ import annotations

from collections.abc import Callable

from history.conversation import LEAF, Conversation
from protocol.records import MessageRecord

INTERRUPTED_CALL = (
    "Interrupted: the server stopped while this call was running, so it did not finish and "
    "its result is unknown. Whatever it did before the stop stays; check before relying on "
    "it or running it again."
)

Record = Callable[..., MessageRecord]  # (role, content, **fields) -> the record appended


def answer_interrupted_calls(
    conversation: Conversation, record: Record, under: str | None = LEAF
) -> str | None:
    """Append an `interrupted` result for each call without one at the end of the path to
    `under` (a record id, or LEAF); returns where the next record goes: the last result
    appended, else `under` itself (None, a new root, is returned as it is)."""
    if under is None:
        return None
    parent = conversation.leaf_id if under is LEAF else under
    calls = conversation.unanswered_calls(parent) if parent is not None else []
    for call in calls:
        function = call.get("function") or {}
        parent = record(
            "tool",
            INTERRUPTED_CALL,
            parent_id=parent,
            tool_call_id=call.get("id"),
            name=function.get("name"),
            meta={"ok": False, "interrupted": True},
        )["id"]
    return parent if calls else under
