"""What the model sees: the system prompt plus as much of the history path as the window holds.

The conversation trees on disk are history/conversation.py's.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from model.messages import ChatMessage, ContentPart

CHARS_PER_TOKEN = 3.5
MESSAGE_OVERHEAD = 4.0  # role, separators and framing the chat template adds per message
TOOL_CALL_OVERHEAD = 8.0
IMAGE_TOKENS = 1_000.0  # an image part; providers count about 85 to 1,600 by its size
MISSING_RESULT = "[no result was recorded: the call was interrupted]"
_RATIO_BOUNDS = (0.5, 3.0)
_SMOOTHING = 0.5
_CACHE_LIMIT = 200_000


def estimate_text_tokens(text: str) -> float:
    """A cheap token estimate: UTF-8 bytes / 3.5 (so CJK text counts about one per character)."""
    size = len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
    return size / CHARS_PER_TOKEN


def _as_text(value: object) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _content_tokens(content: str | list[ContentPart] | None) -> float:
    """Text by its size; each `image_url` part (an attached image) as IMAGE_TOKENS."""
    if not isinstance(content, list):
        return estimate_text_tokens(_as_text(content))
    return sum(
        IMAGE_TOKENS
        if part.get("type") == "image_url"
        else estimate_text_tokens(_as_text(part.get("text")))
        for part in content
        if isinstance(part, dict)
    )


def estimate_message_tokens(message: ChatMessage) -> float:
    """The uncorrected estimate for one message as the API will receive it."""
    tokens = MESSAGE_OVERHEAD + _content_tokens(message.get("content"))
    if message.get("reasoning_content"):
        tokens += estimate_text_tokens(_as_text(message["reasoning_content"]))
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        tokens += TOOL_CALL_OVERHEAD + estimate_text_tokens(
            _as_text(function.get("name")) + _as_text(function.get("arguments"))
        )
    if message.get("tool_call_id"):
        tokens += estimate_text_tokens(_as_text(message["tool_call_id"]))
    return tokens


@dataclass
class BuiltContext:
    """What to send: `messages` (shared record dicts: copy before changing) and its estimate.

    `full_tokens` estimates the whole path as if nothing had been dropped: what decides
    whether the history is condensed. `raw_tokens` is the estimate before the correction.
    """

    messages: list[ChatMessage]
    estimated_tokens: int
    dropped: int = 0
    full_tokens: int = 0
    raw_tokens: float = 0.0


class _Unit(NamedTuple):
    """A user (or system) record, or an assistant record with all its tool results."""

    messages: list[ChatMessage]
    tokens: float
    records: int  # how many of `messages` come from the path (placeholders excluded)
    starts_turn: bool


class ContextBuilder:
    """Fits a history path into the model's window, newest first, never breaking a tool pair.

    Rule: the system prompt and the current turn (the newest user message and everything after
    it) are always sent. Older history is added newest first and kept only as whole turns that
    start with a user message. If the current turn alone is over budget, its middle assistant
    groups are dropped oldest first; its user message and its last assistant group stay.
    `build(..., tools=schemas)` counts the tool schemas against the budget too.
    """

    def __init__(self, window_tokens: int, *, reserve_output_tokens: int | None = None) -> None:
        if window_tokens <= 0:
            raise ValueError("window_tokens must be positive")
        if reserve_output_tokens is None:
            reserve_output_tokens = min(8192, window_tokens // 4)
        self._window = window_tokens
        self._budget = max(1, window_tokens - reserve_output_tokens)
        self._ratio = 1.0
        self._cache: dict[str, float] = {}
        self._units = _UnitCache()
        self.last_used_tokens = 0

    @property
    def limit_tokens(self) -> int:
        """The model's context window, for the status bar."""
        return self._window

    @property
    def budget_tokens(self) -> int:
        """What the prompt may use: the window minus the reserve for the answer."""
        return self._budget

    @property
    def ratio(self) -> float:
        """The current correction factor applied to raw estimates."""
        return self._ratio

    def observe_usage(self, estimated: int, prompt_tokens: int) -> None:
        """Learn from `usage.prompt_tokens` of the request built with `estimated_tokens` here."""
        if estimated <= 0 or prompt_tokens <= 0:
            return
        target = self._ratio * prompt_tokens / estimated
        low, high = _RATIO_BOUNDS
        target = min(high, max(low, target))
        self._ratio += _SMOOTHING * (target - self._ratio)
        self.last_used_tokens = prompt_tokens

    def build(
        self,
        system_prompt: str,
        path: Sequence[ChatMessage],
        *,
        tools: list[dict[str, Any]] | None = None,
    ) -> BuiltContext:
        """System prompt first, then the newest whole units of the root-to-leaf `path` that fit."""
        system: ChatMessage = {"role": "system", "content": system_prompt}
        fixed = estimate_message_tokens(system)
        if tools:
            fixed += estimate_text_tokens(json.dumps(tools, ensure_ascii=False))
        budget = self._budget / self._ratio - fixed
        if len(self._cache) > _CACHE_LIMIT:
            self._cache.clear()
        prefix, tail = self._units.split(path, self._cache)
        units = [*tail, *reversed(prefix.units)]
        full = math.ceil((fixed + sum(u.tokens for u in units)) * self._ratio)
        remaining = iter(units)
        turn = _current_turn(remaining)
        history = _fit_history(remaining, budget - sum(u.tokens for u in turn))
        fitted = _fit_turn(turn, budget)
        kept_units = [*reversed(history), *reversed(fitted)]
        kept, raw = 0, fixed
        for unit in kept_units:
            kept += unit.records
            raw += unit.tokens
        estimated = math.ceil(raw * self._ratio)
        self.last_used_tokens = estimated
        whole = fitted is turn and len(kept_units) == len(units) - _lead(prefix, tail)
        if whole:  # every unit from the first turn on: the prefix's messages were made before
            own = kept_units[len(kept_units) - len(tail) :] if prefix.sent else kept_units
            sent = _unique_call_ids(_messages(own), set(prefix.seen))
            messages = [system, *prefix.sent, *sent]
        else:
            messages = [system, *_unique_call_ids(_messages(kept_units), set())]
        return BuiltContext(messages, estimated, len(path) - kept, max(full, estimated), raw)


def _messages(units: list[_Unit]) -> list[ChatMessage]:
    return [message for unit in units for message in unit.messages]


def _unique_call_ids(messages: list[ChatMessage], seen: set[str]) -> list[ChatMessage]:
    """The messages with every tool-call id unique (the APIs refuse a request repeating one),
    also against the ids in `seen` (sent before them), which it adds theirs to.

    Kimi numbers its ids (`functions.NAME:N`) by the calls in the request, so once older
    calls are left out or condensed away a new call can repeat a kept one's id. The later one
    is renamed in the request only (its record keeps the id the model gave it), the same way
    in every request, so what the provider caches stays the same.
    """
    renamed: dict[str, str] = {}  # ids of the assistant message being copied, old -> new
    out = []
    for message in messages:
        if message.get("role") == "assistant" and message.get("tool_calls"):
            renamed = {}
            calls = []
            for call in message["tool_calls"]:
                call_id = call.get("id")
                if isinstance(call_id, str) and call_id in seen:
                    renamed[call_id] = _fresh_id(call_id, seen)
                    call = {**call, "id": renamed[call_id]}
                seen.add(call.get("id"))
                calls.append(call)
            message = {**message, "tool_calls": calls} if renamed else message
        elif message.get("role") == "tool" and message.get("tool_call_id") in renamed:
            message = {**message, "tool_call_id": renamed[message["tool_call_id"]]}
        elif message.get("role") != "tool":
            renamed = {}
        out.append(message)
    return out


def _fresh_id(call_id: str, seen: set[str]) -> str:
    """An id like `call_id` that `seen` does not hold: the next free number of a numbered
    id (`functions.read_file:3` -> `functions.read_file:4`), else a numbered suffix."""
    stem, _, number = call_id.rpartition(":")
    stem, n = (stem + ":", int(number)) if stem and number.isdigit() else (call_id + "-", 1)
    while f"{stem}{n}" in seen:
        n += 1
    return f"{stem}{n}"


def _tokens(message: ChatMessage, cache: dict[str, float]) -> float:
    """The raw estimate of one message, cached by record id (records never change)."""
    key = message.get("id")
    tokens = cache.get(key) if key is not None else None
    if tokens is None:
        tokens = estimate_message_tokens(message)
        if isinstance(key, str):
            cache[key] = tokens
    return tokens


class _Prefix(NamedTuple):
    """What earlier builds made of a path's closed prefix, oldest first."""

    units: list[_Unit]
    size: int  # how many path records they cover
    last_id: str | None  # of the last record covered
    second_id: str | None  # of the record at 1
    lead: int  # how many units come before the first that starts a turn (all, when none does)
    sent: list[ChatMessage]  # the messages of the units from that one on, call ids made unique
    seen: frozenset[str]  # the call ids in `sent`


_EMPTY = _Prefix([], 0, None, None, 0, [], frozenset())


def _lead(prefix: _Prefix, tail: list[_Unit]) -> int:
    """How many units of the prefix and its `tail` (newest first) come before the first turn."""
    if prefix.lead < len(prefix.units):
        return prefix.lead
    starts = [i for i, unit in enumerate(reversed(tail)) if unit.starts_turn]
    return prefix.lead + (starts[0] if starts else len(tail))


def _extended(
    prefix: _Prefix, added: list[_Unit], size: int, last_id: str, second_id: str | None
) -> _Prefix:
    """The prefix with the next closed units (`added`, oldest first)."""
    lead = _lead(prefix, added[::-1])
    own = added[max(0, lead - len(prefix.units)) :]
    seen = set(prefix.seen)
    sent = prefix.sent + _unique_call_ids(_messages(own), seen)
    return _Prefix(prefix.units + added, size, last_id, second_id, lead, sent, frozenset(seen))


class _UnitCache:
    """Units of the path's closed prefix, kept between builds of a growing conversation, with
    the messages they are sent as when every unit from the first turn on fits.

    A record id fixes its whole ancestry, so a path whose record at `size - 1` has the cached
    id shares the cached prefix. In a condensed view (history/condensed_view.py) the record at
    1 is the summary, which the ancestry does not fix: its id is checked too. Only units already
    followed by a non-tool record are cached: later tool results can no longer join them.
    """

    def __init__(self) -> None:
        # swapped as one value, so a concurrent build never sees a half-updated state
        self._prefix = _EMPTY

    def split(
        self, path: Sequence[ChatMessage], cache: dict[str, float]
    ) -> tuple[_Prefix, list[_Unit]]:
        """The cached prefix `path` starts with, and the units of the rest, newest first."""
        prefix = self._prefix
        size = prefix.size
        second = path[1].get("id") if len(path) > 1 else None
        reusable = (
            0 < size < len(path)
            and path[size - 1].get("id") == prefix.last_id
            and second == prefix.second_id
            and path[size].get("role") != "tool"
        )
        if not reusable:
            prefix, size = _EMPTY, 0
        tail = list(_units_newest_first(path[size:], cache))
        starts = [i for i in range(size, len(path)) if path[i].get("role") != "tool"]
        last = path[starts[-1] - 1].get("id") if len(starts) >= 2 else None
        if isinstance(last, str):  # cache all but the last unit: more results may join that one
            self._prefix = _extended(prefix, tail[:0:-1], starts[-1], last, second)
        elif not reusable:
            self._prefix = _EMPTY
        return prefix, tail


def _units_newest_first(path: Sequence[ChatMessage], cache: dict[str, float]) -> Iterator[_Unit]:
    """Group the path into units from the leaf back; orphaned tool records are left out."""
    pending: list[ChatMessage] = []  # tool records after the current position, newest first
    for record in reversed(path):
        role = record.get("role")
        if role == "tool":
            pending.append(record)
        elif role == "assistant" and record.get("tool_calls"):
            yield _tool_group(record, pending, cache)
            pending = []
        else:
            yield _Unit([record], _tokens(record, cache), 1, role == "user")
            pending = []


def _tool_group(
    assistant: ChatMessage, results: list[ChatMessage], cache: dict[str, float]
) -> _Unit:
    """An assistant tool-call record with exactly one result per call, in call order."""
    by_call = {r.get("tool_call_id"): r for r in results}  # newest first, so the oldest wins
    messages, tokens, records = [assistant], _tokens(assistant, cache), 1
    for call in assistant["tool_calls"]:
        result = by_call.get(call.get("id"))
        if result is None:
            result = {"role": "tool", "tool_call_id": call.get("id"), "content": MISSING_RESULT}
        else:
            records += 1
        messages.append(result)
        tokens += _tokens(result, cache)
    return _Unit(messages, tokens, records, False)


def _current_turn(units: Iterator[_Unit]) -> list[_Unit]:
    """Take units (newest first) up to and including the newest user message (or all)."""
    turn = []
    for unit in units:
        turn.append(unit)
        if unit.starts_turn:
            break
    return turn


def _fit_history(units: Iterator[_Unit], budget: float) -> list[_Unit]:
    """Whole older turns, newest first, while they fit in `budget`."""
    kept: list[_Unit] = []
    pending: list[_Unit] = []  # units of a turn whose user message has not been reached yet
    spent = 0.0
    for unit in units:
        spent += unit.tokens
        if spent > budget:
            break
        pending.append(unit)
        if unit.starts_turn:
            kept.extend(pending)
            pending = []
    return kept


def _fit_turn(turn: list[_Unit], budget: float) -> list[_Unit]:
    """The current turn (newest first), trimmed of middle assistant groups if over budget."""
    total = sum(u.tokens for u in turn)
    if total <= budget or len(turn) <= 2:
        return turn
    middle = turn[1:-1]  # newest first; the oldest sits at the end
    while middle and total > budget:
        total -= middle.pop().tokens
    return [turn[0], *middle, turn[-1]]
