"""Renders task events in a terminal: streamed answer, dimmed thinking, tool calls as they form."""

from __future__ import annotations

import json
import os
from typing import Any, TextIO

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

    def render(self, event: str, payload: dict[str, Any]) -> None:
        handler = getattr(self, f"_on_{event}", None)
        if handler is not None:
            handler(payload)
            self.out.flush()

    def _enter(self, section: str) -> None:
        if self._section and self._section != section:
            self.out.write("\n")
        if section == "thinking" and self._section != "thinking":
            self.out.write(self.paint("thinking: ", DIM))
        self._section = section

    def _on_thinking(self, payload: dict[str, Any]) -> None:
        self._enter("thinking")
        self.out.write(self.paint(payload["text"], DIM))

    def _on_token(self, payload: dict[str, Any]) -> None:
        self._enter("answer")
        self.out.write(payload["text"])

    def _on_tool(self, payload: dict[str, Any]) -> None:
        phase, name = payload["phase"], payload.get("name", "")
        if phase == "start":
            self._enter("args")
            self.out.write(self.paint(f"⚙ {name} ", CYAN, BOLD))
        elif phase == "args":
            self._enter("args")
            self.out.write(self.paint(payload.get("delta", ""), DIM))
        elif phase == "approval":
            self._enter("")
        elif phase == "output":
            self._enter("output")
            self.out.write(self.paint(payload.get("delta", ""), DIM))
        elif phase == "result":
            self._print_result(name, payload)

    def _print_result(self, name: str, payload: dict[str, Any]) -> None:
        self._enter("")
        ok = payload.get("ok", False)
        mark = self.paint("✓", GREEN) if ok else self.paint("✗", RED)
        self.out.write(f"{mark} {name} ({payload.get('duration_ms', 0)} ms)\n")
        lines = (payload.get("output") or "").splitlines()
        shown = lines[:RESULT_PREVIEW_LINES]
        for line in shown:
            self.out.write(self.paint(f"  {line}", DIM) + "\n")
        if len(lines) > len(shown):
            self.out.write(self.paint(f"  … {len(lines) - len(shown)} more lines", DIM) + "\n")

    def _on_file_tree(self, payload: dict[str, Any]) -> None:
        return None

    def _on_error(self, payload: dict[str, Any]) -> None:
        self._enter("")
        self.err.write(self.paint(f"error ({payload['code']}): {payload['message']}", RED) + "\n")
        self.err.flush()

    def _on_done(self, payload: dict[str, Any]) -> None:
        self._enter("")
        reason = payload["reason"]
        if reason == "cancelled":
            self.out.write(self.paint("stopped.", YELLOW) + "\n")
        elif reason == "max_iterations":
            self.out.write(self.paint("stopped: too many model calls in one task.", YELLOW) + "\n")


def json_line(event: str, payload: dict[str, Any]) -> str:
    return json.dumps({"event": event, **payload}, ensure_ascii=False)
