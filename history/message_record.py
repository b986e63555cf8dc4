"""A message record made (docs/protocol.md §5): its id, its place under its parent and its time,
the one way every record is built, stored or not (a sub-agent's, a summary measured first)."""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, TypedDict, Unpack, cast

from protocol.records import MessageMeta, MessageRecord, Role, ToolCallRecord

ROLES = frozenset({"system", "user", "assistant", "tool"})
RESERVED_FIELDS = frozenset(
    {"conversation_id", "parent_id", "depth", "version", "role", "content", "created_at"}
)
_ID_PATTERN = re.compile(r"[A-Za-z0-9_-]{1,64}")


def utc_now() -> str:
    """The current time as ISO-8601 UTC with a `Z` suffix, to the millisecond."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def new_id() -> str:
    """A fresh id for a conversation or a message."""
    return uuid.uuid4().hex


def is_valid_id(value: object) -> bool:
    """Whether `value` may name a conversation on disk (letters, digits, `_` and `-` only)."""
    return isinstance(value, str) and _ID_PATTERN.fullmatch(value) is not None


class RecordFields(TypedDict, total=False):
    """What a record takes besides role and content (None: left out)."""

    id: str | None  # a fixed id instead of a fresh one
    reasoning_content: str | None
    tool_calls: list[ToolCallRecord] | None
    tool_call_id: str | None
    name: str | None
    meta: MessageMeta | None
    seq: int | None


def message_record(
    conversation_id: str,
    role: Role,
    content: str | None,
    *,
    parent: MessageRecord | None,
    version: int = 1,
    **fields: Unpack[RecordFields],
) -> MessageRecord:
    """A new record under `parent` (None: a root), the `version`th child there, stamped now;
    the fields given as None are left out."""
    if role not in ROLES:
        raise ValueError(f"unknown role {role!r}")
    if content is not None and not isinstance(content, str):
        raise TypeError(f"content must be a string, not {type(content).__name__}")
    clash = RESERVED_FIELDS.intersection(fields)
    if clash:
        raise ValueError(f"a record sets these fields itself: {sorted(clash)}")
    given = cast(dict[str, Any], fields)
    meta = given.pop("meta", None)
    record: dict[str, Any] = {
        "id": given.pop("id", None) or new_id(),
        "conversation_id": conversation_id,
        "parent_id": parent["id"] if parent is not None else None,
        "depth": parent.get("depth", 0) + 1 if parent is not None else 0,
        "version": version,
        "role": role,
        "content": content or "",
    }
    for key in ("reasoning_content", "tool_calls", "tool_call_id", "name"):
        if (value := given.pop(key, None)) is not None:
            record[key] = value
    record["created_at"] = utc_now()
    record["meta"] = dict(meta) if meta else {}
    for key, value in given.items():  # seq, and a field no type names (stored as given)
        if value is not None:
            record[key] = value
    return cast(MessageRecord, record)


def public_record(record: Mapping[str, Any]) -> dict[str, Any]:
    """A message record as docs/protocol.md §5 gives it, without in-memory helpers."""
    return {k: v for k, v in record.items() if not k.startswith("_")}
