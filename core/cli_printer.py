"""Renders task events in a terminal: streamed answer, dimmed thinking, tool calls as they form."""

from __future__ import annotations

import json
import os
from typing import TextIO

from core.events import Done, Error, Event, Notice, Thinking, Token, ToolEvent

DIM, BOLD, RESET = "\033[2m", "\033[1m", "\033[0m"
RED, GREEN, CYAN, YELLOW = "\033[31m", "\033[32m", "\033[36m", "\033[33m"
RESULT_PREVIEW_LINES = 12


def use_color(stream: TextIO) -> bool:
    return stream.isatty() and "NO_COLOR" not in os.environ and os.environ.get("TERM") != "dumb"


class EventPrinter:
    """Turns PROTOCOL §4 events into terminal output; one instance per terminal."""

    def __init__(self, out: TextIO, err: TextIO, *, color: bool) -> None:
        self.out, self.err, self.color = out, err, color
        self._section = ""  # "", "thinking", "answer" or "args": what the cursor is inside

    def paint(self, text: str, *styles: str) -> str:
        return "".join(styles) + text + RESET if self.color and styles else text

    def render(self, event: Event) -> None:
        match event:
            case Thinking(text=text):
                self._enter("thinking")
                self.out.write(self.paint(text, DIM))
            case Token(text=text):
                self._enter("answer")
                self.out.write(text)
            case ToolEvent():
                self._on_tool(event)
            case Error(code=code, message=message):
                self._enter("")
                self.err.write(self.paint(f"error ({code}): {message}", RED) + "\n")
                self.err.flush()
            case Notice(message=message):
                self._enter("")
                self.err.write(self.paint(message, YELLOW) + "\n")
                self.err.flush()
            case Done(reason=reason):
                self._on_done(reason)
        self.out.flush()

    def _enter(self, section: str) -> None:
        if self._section and self._section != section:
            self.out.write("\n")
        if section == "thinking" and self._section != "thinking":
            self.out.write(self.paint("thinking: ", DIM))
        self._section = section

    def _on_tool(self, event: ToolEvent) -> None:
        if event.phase == "start":
            self._enter("args")
            self.out.write(self.paint(f"⚙ {event.tool} ", CYAN, BOLD))
        elif event.phase == "args":
            self._enter("args")
            self.out.write(self.paint(event.delta or "", DIM))
        elif event.phase == "approval":
            self._enter("")
        elif event.phase == "output":
            self._enter("output")
            self.out.write(self.paint(event.delta or "", DIM))
        elif event.phase == "result":
            self._print_result(event)

    def _print_result(self, event: ToolEvent) -> None:
        self._enter("")
        mark = self.paint("✓", GREEN) if event.ok else self.paint("✗", RED)
        self.out.write(f"{mark} {event.tool} ({event.duration_ms or 0} ms)\n")
        lines = (event.output or "").splitlines()
        shown = lines[:RESULT_PREVIEW_LINES]
        for line in shown:
            self.out.write(self.paint(f"  {line}", DIM) + "\n")
        if len(lines) > len(shown):
            self.out.write(self.paint(f"  … {len(lines) - len(shown)} more lines", DIM) + "\n")

    def _on_done(self, reason: str) -> None:
        self._enter("")
        if reason == "cancelled":
            self.out.write(self.paint("stopped.", YELLOW) + "\n")
        elif reason == "max_iterations":
            self.out.write(self.paint("stopped: too many model calls in one task.", YELLOW) + "\n")


def json_line(event: Event) -> str:
    """One event as the CLI's `--json` prints it: `{"event": NAME, ...payload}`."""
    return json.dumps({"event": event.name, **event.to_wire()}, ensure_ascii=False)
