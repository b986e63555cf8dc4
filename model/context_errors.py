"""A request over the model's context window, told apart from other refusals by what each
server says: OpenAI, vLLM, DeepSeek and llama-cpp-python answer code `context_length_exceeded`
or "This model's maximum context length is N tokens"; llama.cpp's own server type
`exceed_context_size_error` with `n_ctx`; Kimi "exceeded model token limit: N"."""

from __future__ import annotations

import re
from typing import Any

from model.errors import ContextTooLong

CODES = frozenset({"context_length_exceeded", "exceed_context_size_error"})
SAID = re.compile(
    r"maximum context length|context[ _]length[ _]exceeded|context window|"
    r"exceeds? the (?:available )?context|exceeded model token limit|prompt is too long",
    re.IGNORECASE,
)
WINDOW = re.compile(
    r"(?:maximum context length is|context window of|model token limit:?)\s*(\d+)", re.IGNORECASE
)
REQUESTED = re.compile(r"(?:you requested|requested tokens \()\s*(\d+)", re.IGNORECASE)


def context_too_long(message: str, body: Any = None) -> ContextTooLong | None:
    """The error for a refusal that says the request is over the context window, else None.

    `body` is the error object the server sent (`{"message", "type", "code", ...}`), if any.
    """
    fields = body if isinstance(body, dict) else {}
    named = {str(fields.get("code")), str(fields.get("type"))} & CODES
    if not named and not SAID.search(message):
        return None
    window = _number(fields.get("n_ctx")) or _found(WINDOW, message)
    requested = _number(fields.get("n_prompt_tokens")) or _found(REQUESTED, message)
    return ContextTooLong(explain(message, window, requested))


def explain(said: str, window: int | None, requested: int | None) -> str:
    """What a person reads: the window when known, what to do, and the server's own words."""
    size = ""
    if window:
        needed = f"; this request needed {requested}" if requested else ""
        size = f" ({window} tokens{needed})"
    told = (
        f" If the server's window is smaller than this agent assumes, set AGENT_CONTEXT_WINDOW="
        f"{window} so the history is condensed before it overflows."
        if window
        else ""
    )
    return (
        f"The conversation is too long for the model's context window{size}. Condense it with "
        f"/compact (Compact on the page), start a new conversation, or give a local server a "
        f"larger window (llama.cpp: --n_ctx).{told} The server said: {said.strip()}"
    )


def _found(pattern: re.Pattern[str], text: str) -> int | None:
    match = pattern.search(text)
    return int(match.group(1)) if match else None


def _number(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None
