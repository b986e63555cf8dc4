"""Turn a scripted Reply into the exact bytes a provider sends: SSE chunks or one JSON body."""

from __future__ import annotations

import json
import random
import time
from dataclasses import dataclass
from itertools import zip_longest
from typing import Any

from tests.fake_llm.flavours import Flavour
from tests.fake_llm.replies import Call, Reply

KEEP_ALIVE = ": keep-alive\n\n"
DONE = "data: [DONE]\n\n"
STAMP = "<send-time>"  # a stamped reply's content fragment; `stamp` puts the send time there


@dataclass
class Answer:
    """A Reply resolved for one request: ids chosen, thinking decided, usage counted."""

    flavour: Flavour
    reply: Reply
    base: dict[str, Any]  # the fields every chunk repeats: id, object, created, model
    reasoning: str
    calls: list[tuple[str, Call]]
    usage: dict[str, Any]
    include_usage: bool

    @property
    def finish_reason(self) -> str:
        if self.reply.finish_reason:
            return self.reply.finish_reason
        if self.reply.legacy_call:
            return "function_call"
        return "tool_calls" if self.calls else "stop"


def resolve(reply: Reply, flavour: Flavour, body: dict[str, Any]) -> Answer:
    """Decide ids, reasoning and usage of `reply` as an answer to `body`."""
    earlier = sum(
        len(m.get("tool_calls") or []) for m in body["messages"] if m.get("role") == "assistant"
    )
    calls = [
        (call.id if call.id is not None else flavour.tool_call_id(call.name, index, earlier), call)
        for index, call in enumerate(reply.tool_calls)
    ]
    reasoning = reply.reasoning if flavour.is_thinking(body) else ""
    options = body.get("stream_options") or {}
    return Answer(
        flavour=flavour,
        reply=reply,
        base=flavour.chunk_base(flavour.completion_id(), body["model"]),
        reasoning=reasoning,
        calls=calls,
        usage=_usage(reply, flavour, body, reasoning),
        include_usage=bool(options.get("include_usage")),
    )


def requested_tokens(body: dict[str, Any]) -> tuple[int, int | None]:
    """(prompt, completion): what a request asks of the context window, its prompt counted as
    `_usage` counts one (the tools too, as a server puts them in the prompt), its completion
    as its `max_tokens` (None when it sets none)."""
    prompt = json.dumps(body["messages"], ensure_ascii=False) + json.dumps(body.get("tools") or [])
    limit = body.get("max_tokens")
    return len(prompt) // 4 + 1, limit if isinstance(limit, int) else None


def _usage(reply: Reply, flavour: Flavour, body: dict[str, Any], reasoning: str) -> dict[str, Any]:
    if reply.usage is not None:
        prompt, completion = reply.usage
    else:
        prompt = len(json.dumps(body["messages"], ensure_ascii=False)) // 4 + 1
        produced = reply.content + reasoning + "".join(c.arguments for c in reply.tool_calls)
        completion = len(produced) // 4 + 1
    usage: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    cached = min(reply.cached_tokens, prompt)
    if flavour.name == "deepseek":
        usage |= {
            "prompt_cache_hit_tokens": cached,
            "prompt_cache_miss_tokens": prompt - cached,
            "completion_tokens_details": {"reasoning_tokens": len(reasoning) // 4},
        }
    elif cached:  # OpenAI, Kimi and DashScope say it as OpenAI does
        usage["prompt_tokens_details"] = {"cached_tokens": cached}
    return usage


def stream_frames(answer: Answer) -> list[str]:
    """Every SSE frame of the streamed answer, `[DONE]` last."""
    flavour, reply = answer.flavour, answer.reply
    rng = random.Random(reply.split_seed) if reply.split_seed is not None else None
    null_pairs = flavour.sends_null_fields and bool(answer.reasoning)
    deltas: list[dict[str, Any]] = [_first_delta(answer)]
    for piece in split_text(answer.reasoning, reply.chunk_size, rng):
        deltas.append(
            {"content": None, "reasoning_content": piece}
            if null_pairs
            else {"reasoning_content": piece}
        )
    for piece in split_text(reply.content, reply.chunk_size, rng):
        text = STAMP if reply.stamp else piece
        deltas.append(
            {"content": text, "reasoning_content": None} if null_pairs else {"content": text}
        )
    for fragment in _tool_fragments(answer, rng):
        if reply.legacy_call:
            deltas.append({"function_call": fragment["function"]})
        elif flavour.repeats_call_head:
            deltas.append({"function_call": fragment["function"], "tool_calls": [fragment]})
        else:
            deltas.append({"tool_calls": [fragment]})
    frames = [KEEP_ALIVE] if flavour.name == "deepseek" else []
    frames += [_data(_chunk(answer, delta, None)) for delta in deltas]
    frames.append(_data(_final_chunk(answer)))
    if flavour.usage_place == "extra_chunk" and answer.include_usage:
        frames.append(_data({**answer.base, "choices": [], "usage": answer.usage}))
    frames.append(DONE)
    return frames


def _first_delta(answer: Answer) -> dict[str, Any]:
    return answer.flavour.first_delta(bool(answer.reasoning), bool(answer.calls))


def _chunk(answer: Answer, delta: dict[str, Any], finish_reason: str | None) -> dict[str, Any]:
    chunk = dict(answer.base)
    chunk["choices"] = [
        {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
    ]
    if answer.flavour.usage_place == "extra_chunk" and answer.include_usage:
        chunk["usage"] = None
    return chunk


def _final_chunk(answer: Answer) -> dict[str, Any]:
    place = answer.flavour.usage_place
    delta = {"content": ""} if answer.flavour.sends_null_fields else {}
    chunk = _chunk(answer, delta, answer.finish_reason if answer.reply.says_finish else None)
    if place == "last_chunk":
        chunk["usage"] = answer.usage
    elif place == "choice":
        chunk["choices"][0]["usage"] = answer.usage
    return chunk


def _data(chunk: dict[str, Any]) -> str:
    return f"data: {json.dumps(chunk, ensure_ascii=False, separators=(',', ':'))}\n\n"


def stamp(frame: str) -> str:
    """The frame with its STAMP placeholder, if any, replaced by the send time in ns and a `;`."""
    return frame.replace(STAMP, f"{time.time_ns()};") if STAMP in frame else frame


def split_text(text: str, size: int, rng: random.Random | None) -> list[str]:
    """Cut `text` into pieces of `size` characters, or random sizes 1..size with `rng`."""
    pieces: list[str] = []
    position = 0
    while position < len(text):
        length = rng.randint(1, max(1, size)) if rng else max(1, size)
        pieces.append(text[position : position + length])
        position += length
    return pieces


def _tool_fragments(answer: Answer, rng: random.Random | None) -> list[dict[str, Any]]:
    per_call = [
        _call_fragments(index, call_id, call, answer.reply.chunk_size, rng)
        for index, (call_id, call) in enumerate(answer.calls)
    ]
    if answer.flavour.repeats_call_head and not answer.reply.legacy_call:
        per_call = [[_with_head(fragments[0], f) for f in fragments] for fragments in per_call]
    if not answer.reply.interleave:
        return [fragment for fragments in per_call for fragment in fragments]
    return [f for group in zip_longest(*per_call) for f in group if f is not None]


def _with_head(head: dict[str, Any], fragment: dict[str, Any]) -> dict[str, Any]:
    return {**head, **fragment, "function": {**head["function"], **fragment["function"]}}


def _call_fragments(
    index: int, call_id: str, call: Call, size: int, rng: random.Random | None
) -> list[dict[str, Any]]:
    pieces = list(call.pieces) if call.pieces is not None else split_text(call.arguments, size, rng)
    first = pieces.pop(0) if pieces and rng is not None and rng.random() < 0.5 else ""
    head: dict[str, Any] = {"index": index}
    if call_id:  # "": a server that gives no ids
        head["id"] = call_id
    head |= {"type": "function", "function": {"name": call.name, "arguments": first}}
    return [head] + [{"index": index, "function": {"arguments": piece}} for piece in pieces]


def completion_body(answer: Answer) -> dict[str, Any]:
    """The non-streaming `chat.completion` body of the answer."""
    message: dict[str, Any] = {
        "role": "assistant",
        "content": answer.reply.content or (None if answer.calls else ""),
    }
    if answer.reasoning:
        message["reasoning_content"] = answer.reasoning
    if answer.calls and answer.reply.legacy_call:
        _, call = answer.calls[0]
        message["function_call"] = {"name": call.name, "arguments": call.arguments}
    elif answer.calls:
        message["tool_calls"] = [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
            for call_id, call in answer.calls
        ]
    return {
        **answer.base,
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": answer.finish_reason,
            }
        ],
        "usage": answer.usage,
    }
