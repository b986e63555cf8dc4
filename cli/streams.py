"""The terminal's output streams: whether one takes colour, where its cursor stands, and the
`--json` lines."""

from __future__ import annotations

import json
import os
from typing import TextIO

from protocol.events import ContextEvent, Event


def use_color(stream: TextIO) -> bool:
    return stream.isatty() and "NO_COLOR" not in os.environ and os.environ.get("TERM") != "dumb"


class LineState:
    """One output stream and whether its cursor stands at the start of a line."""

    def __init__(self, file: TextIO) -> None:
        self.file = file
        self.line_start = True

    def write(self, text: str) -> None:
        if text:
            self.file.write(text)
            self.line_start = text.endswith("\n")

    def end_line(self) -> None:
        if not self.line_start:
            self.write("\n")


def context_line(event: ContextEvent) -> str:
    """One line on the history being condensed."""
    if event.phase == "condensing":
        return f"condensing the context ({event.tokens_before:,} tokens)…"
    return (
        f"context condensed: {event.summarized} earlier messages summarised, "
        f"{event.tokens_before:,} → {event.tokens_after or 0:,} tokens"
    )


def json_line(event: Event) -> str:
    """One event as the CLI's `--json` prints it: `{"event": NAME, ...payload}`."""
    return json.dumps({"event": event.name, **event.to_wire()}, ensure_ascii=False)
