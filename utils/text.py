"""Small text helpers shared by tools and logs."""

from __future__ import annotations


def cap_text(text: str, limit: int) -> str:
    """Keep the head and tail of `text` within `limit` characters, saying how much was cut."""
    if len(text) <= limit:
        return text
    head = limit * 2 // 3
    tail = limit - head
    cut = len(text) - head - tail
    return f"{text[:head]}\n… [{cut} characters omitted] …\n{text[-tail:]}"
