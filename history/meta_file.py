"""Reading meta.json, and merging it when another process wrote it since this one read it
and this one changed it too (history/conversation.py writes it)."""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

from protocol.records import ConversationMeta

log = logging.getLogger(__name__)


def read_meta(directory: Path, *, quiet: bool = False) -> ConversationMeta | None:
    """meta.json's object; None (with a warning unless `quiet`) when it cannot be read."""
    try:
        meta = json.loads((directory / "meta.json").read_text(encoding="utf-8"))
        if isinstance(meta, dict):
            return cast(ConversationMeta, meta)  # a JSON object: its shape is not checked
        error = "not a JSON object"
    except (OSError, ValueError) as exc:
        error = str(exc)[:200]
    if not quiet:
        log.warning(
            "skipped a conversation with unreadable meta.json",
            extra={"fields": {"conversation_id": directory.name, "error": error}},
        )
    return None


def merged_meta(
    disk: ConversationMeta, base: ConversationMeta, mine: ConversationMeta
) -> ConversationMeta:
    """Another process wrote meta.json since `base` was read: its version, with the keys this
    one changed since `base` (top-level, and inside the free-form `meta`) put on top."""
    merged: dict[str, Any] = copy.deepcopy(dict(disk))
    _put_changes(merged, base, mine, skip="meta")
    inner: dict[str, Any] = merged.setdefault("meta", {})
    _put_changes(inner, base.get("meta") or {}, mine.get("meta") or {})
    updates = [str(m["updated_at"]) for m in (disk, mine) if m.get("updated_at")]
    if updates:  # both changed it: the later one (ISO-8601 UTC strings sort by time)
        merged["updated_at"] = max(updates)
    return cast(ConversationMeta, merged)  # merged key by key: disk's keys with ours on top


def _put_changes(
    target: dict[str, Any], base: Mapping[str, object], mine: Mapping[str, object], skip: str = ""
) -> None:
    """Put on `target` every key but `skip` that `mine` changed since `base` (a key it
    removed is removed)."""
    for key in mine.keys() | base.keys():
        if key != skip and mine.get(key) != base.get(key):
            if key in mine:
                target[key] = copy.deepcopy(mine[key])
            else:
                target.pop(key, None)
