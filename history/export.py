"""A conversation's current branch (root to the current leaf) exported for a person: Markdown to
read (each message, tool calls summarised a line each), or JSON (its meta.json and the message
records as stored, docs/protocol.md §5), with a file name made from its title."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any, Literal
from urllib.parse import quote

from history.conversation import Conversation
from history.message_record import public_record
from protocol.records import MessageRecord, ToolCallRecord

ExportFormat = Literal["md", "json"]
EXPORT_FORMATS: tuple[ExportFormat, ...] = ("md", "json")
MEDIA_TYPES = {"md": "text/markdown", "json": "application/json"}
RESULT_CHARS = 160  # of a tool's result, in the Markdown's line for its call
_UNSAFE = re.compile(r"[^\w.-]+")


def export_text(conversation: Conversation, fmt: ExportFormat) -> str:
    """The conversation's current branch as Markdown or JSON text."""
    path = conversation.path()
    if fmt == "json":
        exported = {"conversation": conversation.meta, "messages": [public_record(r) for r in path]}
        return json.dumps(exported, ensure_ascii=False, indent=2) + "\n"
    return _markdown(conversation.meta.get("title"), conversation.id, path)


def export_name(title: str | None, conversation_id: str, fmt: ExportFormat) -> str:
    """A file name for the export: the title reduced to safe characters, else the id."""
    safe = _UNSAFE.sub("-", title or "").strip("-.")[:80]
    return f"{safe or 'conversation-' + conversation_id[:8]}.{fmt}"


def export_download(conversation: Conversation, fmt: ExportFormat) -> tuple[str, str, str]:
    """The export as a download: its text, media type and Content-Disposition (the name made
    from the title, in ASCII, then in UTF-8)."""
    name = export_name(conversation.meta.get("title"), conversation.id, fmt)
    fallback = name.encode("ascii", "ignore").decode() or f"conversation.{fmt}"
    disposition = f"attachment; filename=\"{fallback}\"; filename*=UTF-8''{quote(name)}"
    return export_text(conversation, fmt), MEDIA_TYPES[fmt], disposition


def _markdown(title: str | None, conversation_id: str, path: Sequence[MessageRecord]) -> str:
    results = {r.get("tool_call_id"): r for r in path if r["role"] == "tool"}
    parts = [
        f"# {title or 'Conversation'}\n",
        f"*Workspace Agent conversation `{conversation_id}`*\n",
    ]
    for record in path:
        if record["role"] == "user":
            parts.append(_user(record))
        elif record["role"] == "assistant":
            parts.append(_assistant(record, results))
        elif record["role"] == "system" and record.get("meta", {}).get("summary"):
            parts.append(f"## Summary of the earlier messages\n\n{record['content'].strip()}\n")
    return "\n".join(parts)


def _user(record: MessageRecord) -> str:
    files = record.get("meta", {}).get("attachments", [])
    lines = [record["content"].strip(), *(f"- attached: {_code(file['path'])}" for file in files)]
    return "## You\n\n" + "\n".join(line for line in lines if line) + "\n"


def _assistant(record: MessageRecord, results: dict[Any, MessageRecord]) -> str:
    text = record["content"].strip()
    calls = [_call_line(call, results.get(call["id"])) for call in record.get("tool_calls", [])]
    body = "\n".join(part for part in (text, "\n".join(calls)) if part)
    return f"## Assistant\n\n{body}\n"


def _call_line(call: ToolCallRecord, result: MessageRecord | None) -> str:
    """`- tool `name` {args} → outcome: the result's first line, cut."""
    function = call["function"]
    args = " ".join(function["arguments"].split())
    args = args if len(args) <= RESULT_CHARS else args[: RESULT_CHARS - 1] + "…"
    if result is None:
        return f"- tool `{function['name']}` {_code(args)}: no result"
    meta = result.get("meta", {})
    outcome = "declined" if meta.get("declined") else "ok" if meta.get("ok", True) else "failed"
    first = next((line.strip() for line in result["content"].splitlines() if line.strip()), "")
    if len(first) > RESULT_CHARS:
        first = first[: RESULT_CHARS - 1] + "…"
    line = f"- tool `{function['name']}` {_code(args)} → {outcome}"
    return line + (f": {first}" if first else "")


def _code(text: str) -> str:
    """`text` as inline code, whatever backticks it holds."""
    ticks = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    return f"{ticks} {text} {ticks}" if "`" in text else f"`{text}`"
