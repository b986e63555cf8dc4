"""One streamed call's chunks read into its deltas, and what the call has produced so far."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from model.completion import Completion, ContentDelta, ReasoningDelta, StreamItem
from model.context_errors import context_too_long
from model.errors import MalformedChunk
from model.tool_calls import ToolCallAssembler
from protocol.event_values import Usage


@dataclass
class CallState:
    """What one model call has produced so far."""

    content: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    assembler: ToolCallAssembler = field(default_factory=ToolCallAssembler)
    usage: Usage = field(default_factory=Usage)
    finish_reason: str | None = None
    tool_calls_seen: bool = False  # `delta.tool_calls` came: a legacy `function_call` repeats them
    received: bool = False
    started: float = field(default_factory=time.monotonic)
    first_delta: float | None = None

    def completion(self) -> Completion:
        return Completion(
            "".join(self.content),
            "".join(self.reasoning),
            self.assembler.calls(),
            self.usage,
            self.finish_reason,
        )


def read_chunk(data: str, state: CallState) -> list[StreamItem]:
    """The deltas of one SSE `data:` payload, recorded in `state`; raises MalformedChunk for a
    chunk of another shape, the context error or ValueError for an error reported mid-stream."""
    try:
        chunk = json.loads(data)
    except ValueError:
        raise MalformedChunk(f"a stream chunk is not JSON: {data[:200]}") from None
    if not isinstance(chunk, dict):
        raise MalformedChunk(f"a stream chunk is not a JSON object: {data[:200]}")
    if chunk.get("error"):
        error = chunk["error"]
        message = str(error.get("message") if isinstance(error, dict) else error)
        too_long = context_too_long(message, error)
        if too_long is not None:
            raise too_long
        raise ValueError(f"the model API reported an error mid-stream: {message}")
    text = _plain_text(chunk)
    if text is not None and state.received:
        state.content.append(text)
        return [ContentDelta(text)]
    return _items(chunk, data, state)


PLAIN_DELTA = frozenset({"content", "role"})


def _plain_text(chunk: dict[str, Any]) -> str | None:
    """The text of a chunk that is one choice's text and nothing else (no usage, reasoning,
    tool call or finish), as most of a reply's chunks are; None for any other chunk, which
    `_items` reads field by field: this is what a delta costs most of the time."""
    choices = chunk.get("choices")
    if type(choices) is not list or len(choices) != 1 or chunk.get("usage") is not None:
        return None
    choice = choices[0]
    if type(choice) is not dict or choice.get("finish_reason") is not None:
        return None
    delta = choice.get("delta")
    if choice.get("usage") is not None or type(delta) is not dict:
        return None
    others = delta.keys() - PLAIN_DELTA  # DeepSeek sends `"reasoning_content": null` along
    if others and any(delta[key] is not None for key in others):
        return None
    text = delta.get("content")
    return text if type(text) is str and text else None


def _items(chunk: dict[str, Any], data: str, state: CallState) -> list[StreamItem]:
    usage = _field(chunk, "usage", dict)
    items: list[StreamItem] = []
    for choice in _field(chunk, "choices", list) or []:
        if not isinstance(choice, dict):
            raise MalformedChunk(f"a choice in a stream chunk is not an object: {data[:200]}")
        usage = usage or _field(choice, "usage", dict)  # Kimi puts usage in the choice
        delta = _field(choice, "delta", dict) or {}
        reasoning = _field(delta, "reasoning_content", str) or _field(delta, "reasoning", str)
        if reasoning:
            state.reasoning.append(reasoning)
            items.append(ReasoningDelta(reasoning))
        content = _field(delta, "content", str)
        if content:
            state.content.append(content)
            items.append(ContentDelta(content))
        fragments = _field(delta, "tool_calls", list) or []
        state.tool_calls_seen = state.tool_calls_seen or bool(fragments)
        legacy = _field(delta, "function_call", dict)
        if legacy and not state.tool_calls_seen:  # the pre-tools API: one call, no id
            fragments = [{"index": 0, "function": legacy}]
        for fragment in fragments:
            if not isinstance(fragment, dict):
                raise MalformedChunk(f"a tool call fragment is not an object: {data[:200]}")
            items.extend(state.assembler.feed(fragment))
        state.finish_reason = _field(choice, "finish_reason", str) or state.finish_reason
    if usage:
        state.usage = Usage(
            int(usage.get("prompt_tokens") or 0),
            int(usage.get("completion_tokens") or 0),
            cached_prompt_tokens=_cached_tokens(usage),
        )
    if items and not state.received:
        state.received = True
        state.first_delta = time.monotonic()
    return items


def _field(data: dict[str, Any], key: str, kind: type) -> Any:
    """`data[key]` when absent, null or of `kind`; a chunk of another shape is refused."""
    value = data.get(key)
    if value is not None and not isinstance(value, kind):
        raise MalformedChunk(
            f"a stream chunk has {key!r} as {type(value).__name__}, not {kind.__name__}"
        )
    return value


def _cached_tokens(usage: dict[str, Any]) -> int:
    """The prompt tokens the provider read from its cache: DeepSeek's `prompt_cache_hit_tokens`,
    or OpenAI's `prompt_tokens_details.cached_tokens` (Kimi's and DashScope's too)."""
    hit = usage.get("prompt_cache_hit_tokens")
    if isinstance(hit, int):
        return hit
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    return cached if isinstance(cached, int) else 0
