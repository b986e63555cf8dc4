"""Condensing a long history: where a summary may cut it, and the view the model is then sent.

A summary is a `system` record with `meta.summary: {first_kept_id, ...}`, appended at the leaf
like any record: nothing is rewritten. The view of a path whose newest summary is S is the
root (the first user message), S as a user message, then every record from `first_kept_id`
on (summaries left out). Cuts fall only just before a user's own message, so a batch of tool
calls always stays with its results, and every kept record is sent exactly as stored
(an assistant's `reasoning_content` included: DeepSeek and Kimi refuse a request without it).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from history.context_builder import estimate_message_tokens
from model.messages import ChatMessage
from protocol.records import MessageRecord, SummaryMeta

SUMMARY_HEADER = (
    "[Summary of the earlier part of this conversation, written when the context grew long. "
    "The messages it replaces are no longer shown; the workspace's files are as they are now, "
    "so read them again when you need their content.]"
)
SUMMARY_SYSTEM = (
    "You condense the history of a conversation between a user and a coding agent that works "
    "inside one folder (its workspace) with tools: reading, writing and searching files, "
    "running commands. The agent will continue from your summary alone, so it must not lose "
    "anything it still needs."
)
SUMMARY_TASK = (
    "Summarise the conversation below for the agent. Keep: what the user asked for and every "
    "decision or preference they stated; what was done (files created, changed or deleted, "
    "with their paths; commands run and what they showed); findings, errors and how they were "
    "solved; what is still open or was promised. Keep exact paths, names, numbers and short "
    "code identifiers. Leave out chatter and tool output that no longer matters. Write plain "
    "text or short Markdown lists, at most about 800 words, and nothing but the summary."
)
SUMMARY_MAX_CHARS = 24_000  # a reply longer than this is cut: the summary must stay small
TEXT_CHARS = 6_000  # of one user or assistant message in the summary request
TOOL_CHARS = 1_500  # of one tool result
ARGUMENT_CHARS = 500  # of one call's arguments
INSTRUCTION_CHARS = 2_000


def summary_meta(record: ChatMessage) -> SummaryMeta | None:
    """The `meta.summary` of a summary record; None for every other record."""
    meta = record.get("meta")
    if record.get("role") != "system" or not isinstance(meta, dict):
        return None
    summary = meta.get("summary")
    if isinstance(summary, dict) and isinstance(summary.get("first_kept_id"), str):
        return summary
    return None


def is_turn_start(record: ChatMessage) -> bool:
    """A user's own message, where a cut may fall (a plan's instructions to itself are not)."""
    meta = record.get("meta") or {}
    return record.get("role") == "user" and "plan_prompt" not in meta and "plan_step" not in meta


@dataclass(frozen=True)
class ActiveSummary:
    """The summary a path's view uses, and the position of the first record it keeps."""

    record: MessageRecord
    cut: int


def active_summary(path: Sequence[MessageRecord]) -> ActiveSummary | None:
    """The newest summary on `path` whose first kept record lies on the path before it."""
    for index in range(len(path) - 1, 0, -1):
        summary = summary_meta(path[index])
        if summary is None:
            continue
        wanted = summary["first_kept_id"]
        cut = next((i for i in range(index - 1, 0, -1) if path[i].get("id") == wanted), None)
        if cut is not None:
            return ActiveSummary(path[index], cut)
    return None


def summary_message(record: MessageRecord) -> ChatMessage:
    """A summary record as the model reads it: a user message, the same on every build."""
    return {
        "id": record["id"],
        "role": "user",
        "content": f"{SUMMARY_HEADER}\n\n{record.get('content') or ''}",
    }


def model_view(path: Sequence[MessageRecord]) -> Sequence[ChatMessage]:
    """What the model is sent of a root-to-leaf `path`, before it is fitted to the window."""
    active = active_summary(path)
    if active is None:
        if not any(summary_meta(r) for r in path):
            return path
        return [r for r in path if summary_meta(r) is None]
    kept = (r for r in path[active.cut :] if summary_meta(r) is None)
    return [path[0], summary_message(active.record), *kept]


class ViewCache:
    """The model view of the last path, each record as `expand` turns it, extended as the
    path grows: a call at the end of a long history expands only the records added since
    the one before. `key` names what else `expand` depends on."""

    def __init__(self) -> None:
        # swapped as one value, so a concurrent call never sees a half-updated state
        self._last: tuple[list[MessageRecord], list[ChatMessage], object] = ([], [], None)

    def view(
        self,
        path: list[MessageRecord],
        expand: Callable[[ChatMessage], ChatMessage],
        key: object,
    ) -> list[ChatMessage]:
        """`expand` applied to each message of `model_view(path)`."""
        last, view, last_key = self._last
        grown = (
            key == last_key
            and 0 < len(last) <= len(path)
            and path[: len(last)] == last
            and not any(summary_meta(r) for r in path[len(last) :])
        )
        if grown:  # the same summary, if any, cuts it: the view only gains the new records
            view = view + [expand(r) for r in path[len(last) :]]
        else:
            view = [expand(r) for r in model_view(path)]
        self._last = (path, view, key)
        return view


def condensed_ids(path: Sequence[MessageRecord]) -> set[str]:
    """The ids of the records a summary replaces on this path (the page greys them)."""
    active = active_summary(path)
    if active is None:
        return set()
    return {r["id"] for r in path[1 : active.cut] if summary_meta(r) is None}


@dataclass(frozen=True)
class Cut:
    """A planned condensation: the first record kept, what is newly replaced, what it extends."""

    first_kept: MessageRecord
    replaced: list[MessageRecord]
    previous: MessageRecord | None  # the summary the new one takes over from


def plan_cut(path: Sequence[MessageRecord], *, keep_tokens: float) -> Cut | None:
    """The earliest cut after which the rest of `path` fits `keep_tokens` (raw estimate).

    The newest turn (from the newest user message on) is always kept, however large; a cut
    that would replace nothing new gives None.
    """
    active = active_summary(path)
    start = active.cut if active else 1
    starts = [i for i in range(start + 1, len(path)) if is_turn_start(path[i])]
    if not starts:
        return None
    suffix = [0.0] * (len(path) + 1)
    for i in range(len(path) - 1, -1, -1):
        own = 0.0 if summary_meta(path[i]) else estimate_message_tokens(path[i])
        suffix[i] = suffix[i + 1] + own
    cut = next((i for i in starts if suffix[i] <= keep_tokens), starts[-1])
    replaced = [r for r in path[start:cut] if summary_meta(r) is None]
    if not replaced:
        return None
    return Cut(path[cut], replaced, active.record if active else None)


def summary_request(
    path: Sequence[MessageRecord], cut: Cut, *, instructions: str | None, max_chars: int
) -> list[ChatMessage]:
    """The messages of the call that writes the summary: plain text, no tools, no reasoning,
    so no provider rule on tool calls or reasoning can refuse it. At most about `max_chars`:
    the oldest replaced messages are left out first."""
    names: dict[str | None, str] = {
        call.get("id"): (call.get("function") or {}).get("name", "")
        for record in cut.replaced
        for call in record.get("tool_calls") or ()
    }
    blocks = [b for b in (_render(record, names) for record in cut.replaced) if b]
    previous = _clip(str(cut.previous.get("content") or ""), max_chars // 3) if cut.previous else ""
    first = _clip(str(path[0].get("content") or ""), TEXT_CHARS) if path else ""
    room = max_chars - len(previous) - len(first) - len(SUMMARY_TASK) - INSTRUCTION_CHARS
    kept: list[str] = []
    for block in reversed(blocks):
        if kept and len(block) > room:
            break
        kept.append(block)
        room -= len(block) + 2
    kept.reverse()
    parts = [SUMMARY_TASK]
    if instructions and instructions.strip():
        parts.append(
            "The user asks for this in the summary: "
            + _clip(instructions.strip(), INSTRUCTION_CHARS)
        )
    parts.append(
        "## The conversation's first message (it stays in the context as it is)\n\n" + first
    )
    if previous:
        parts.append("## Summary of what came before (fold it into yours)\n\n" + previous)
    left_out = len(blocks) - len(kept)
    history = "\n\n".join(kept)
    if left_out:
        history = f"[{left_out} older messages left out for length]\n\n{history}"
    parts.append("## The messages to summarise\n\n" + history)
    return [
        {"role": "system", "content": SUMMARY_SYSTEM},
        {"role": "user", "content": "\n\n".join(parts)},
    ]


def clean_summary(text: str) -> str:
    """The model's summary as it is stored: trimmed and capped."""
    text = text.strip()
    if len(text) > SUMMARY_MAX_CHARS:
        text = text[: SUMMARY_MAX_CHARS - 1].rstrip() + "…"
    return text


def _render(record: MessageRecord, names: dict[str | None, str]) -> str:
    role = record.get("role")
    content = str(record.get("content") or "")
    if role == "user":
        return "USER: " + _clip(content, TEXT_CHARS)
    if role == "tool":
        name = names.get(record.get("tool_call_id")) or record.get("name") or "tool"
        failed = (record.get("meta") or {}).get("ok") is False
        return f"RESULT of {name}{' (failed)' if failed else ''}: " + _clip(content, TOOL_CHARS)
    if role != "assistant":
        return ""
    lines = ["ASSISTANT: " + _clip(content, TEXT_CHARS)] if content else []
    for call in record.get("tool_calls") or ():
        function = call.get("function") or {}
        arguments = function.get("arguments")
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=False)
        name = function.get("name", "")
        lines.append(f"ASSISTANT CALLED {name}({_clip(arguments, ARGUMENT_CHARS)})")
    if (record.get("meta") or {}).get("interrupted"):
        lines.append("(this answer was interrupted)")
    return "\n".join(lines)


def _clip(text: str, limit: int) -> str:
    """At most about `limit` characters: the head and the tail, the middle counted."""
    if len(text) <= limit:
        return text
    head, tail = limit * 2 // 3, limit // 3
    return f"{text[:head]}\n[… {len(text) - head - tail} characters left out …]\n{text[-tail:]}"
