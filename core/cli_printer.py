"""Renders task events in a terminal: streamed answer, dimmed thinking, tool calls as they form,
a plan's checklist, and a sub-agent's output indented under the call that delegated to it."""

from __future__ import annotations

import json
import os
from typing import TextIO

from core.events import Done, Error, Event, Notice, PlanEvent, Thinking, Token, ToolEvent

DIM, BOLD, RESET = "\033[2m", "\033[1m", "\033[0m"
RED, GREEN, CYAN, YELLOW = "\033[31m", "\033[32m", "\033[36m", "\033[33m"
RESULT_PREVIEW_LINES = 12
INDENT = "  "  # per level of sub-agent
STEP_MARKS = {"pending": "○", "running": "◐", "done": "✓", "failed": "✗"}
PLAN_TOOLS = {"make_plan", "finish_step"}  # the plan's lines say it all; only a failure shows


def use_color(stream: TextIO) -> bool:
    return stream.isatty() and "NO_COLOR" not in os.environ and os.environ.get("TERM") != "dumb"


class EventPrinter:
    """Turns PROTOCOL §4 events into terminal output; one instance per terminal."""

    def __init__(self, out: TextIO, err: TextIO, *, color: bool) -> None:
        self.out, self.err, self.color = out, err, color
        self._section = ""  # "", "thinking", "answer" or "args": what the cursor is inside
        self._speaker: tuple[str | None, str | None] = (None, None)  # (parent call, agent)
        self._announced: set[tuple[str | None, str | None]] = set()
        self._indent = ""
        self._line_start = True

    def paint(self, text: str, *styles: str) -> str:
        return "".join(styles) + text + RESET if self.color and styles else text

    def render(self, event: Event) -> None:
        match event:
            case Thinking(text=text):
                self._speak(event)
                self._enter("thinking")
                self._write(text, DIM)
            case Token(text=text):
                self._speak(event)
                self._enter("answer")
                self._write(text)
            case ToolEvent():
                self._speak(event)
                self._on_tool(event)
            case PlanEvent():
                self._speak(event)
                self._on_plan(event)
            case Error(code=code, message=message):
                self._enter("")
                self.err.write(self.paint(f"error ({code}): {message}", RED) + "\n")
                self.err.flush()
            case Notice(message=message):
                self._enter("")
                self.err.write(self.paint(message, YELLOW) + "\n")
                self.err.flush()
            case Done(reason=reason):
                self._speak(event)
                self._on_done(reason)
        self.out.flush()

    def _speak(self, event: Event) -> None:
        """Follow whose output this is: a sub-agent's is indented by its depth, and the first time
        it talks a line `↳ NAME:` says who it is."""
        depth = event.depth or 0
        speaker = (event.parent_call_id, event.agent) if depth else (None, None)
        if speaker == self._speaker:
            return
        self._enter("")
        self._speaker = speaker
        self._indent = ""
        if depth and speaker not in self._announced:
            self._announced.add(speaker)
            self._indent = INDENT * (depth - 1)
            self._write(self.paint(f"↳ {event.agent}:", CYAN) + "\n")
        self._indent = INDENT * depth

    def _write(self, text: str, *styles: str) -> None:
        """Write text, each line after the current indent (lines painted one by one)."""
        if not text:
            return
        parts: list[str] = []
        for number, line in enumerate(text.split("\n")):
            if number:
                parts.append("\n")
                self._line_start = True
            if line:
                if self._line_start:
                    parts.append(self._indent)
                parts.append(self.paint(line, *styles))
                self._line_start = False
        self.out.write("".join(parts))

    def _enter(self, section: str) -> None:
        if self._section and self._section != section:
            self._write("\n")
        if section == "thinking" and self._section != "thinking":
            self._write("thinking: ", DIM)
        self._section = section

    def _on_tool(self, event: ToolEvent) -> None:
        if event.tool in PLAN_TOOLS:
            if event.phase == "result" and not event.ok:
                self._print_result(event)
            return
        if event.phase == "start":
            self._enter("args")
            self._write(f"⚙ {event.tool} ", CYAN, BOLD)
        elif event.phase == "args":
            self._enter("args")
            self._write(event.delta or "", DIM)
        elif event.phase == "approval":
            self._enter("")
        elif event.phase == "output":
            self._enter("output")
            self._write(event.delta or "", DIM)
        elif event.phase == "result":
            self._print_result(event)

    def _print_result(self, event: ToolEvent) -> None:
        self._enter("")
        mark = self.paint("✓", GREEN) if event.ok else self.paint("✗", RED)
        self._write(f"{mark} {event.tool} ({event.duration_ms or 0} ms)\n")
        lines = (event.output or "").splitlines()
        shown = lines[:RESULT_PREVIEW_LINES]
        for line in shown:
            self._write(self.paint(f"  {line}", DIM) + "\n")
        if len(lines) > len(shown):
            self._write(self.paint(f"  … {len(lines) - len(shown)} more lines", DIM) + "\n")

    def _on_plan(self, event: PlanEvent) -> None:
        """The checklist when the plan is made or remade; one line when a step starts or ends."""
        steps = event.plan.get("steps") or []
        self._enter("")
        if event.phase in ("created", "replanned"):
            if event.phase == "replanned" and event.reason:
                self._write(self.paint(f"re-planning: {event.reason}", YELLOW) + "\n")
            revision = event.plan.get("revision", 0)
            self._write(self.paint(f"Plan (revision {revision}):", BOLD) + "\n")
            for step in steps:
                mark = STEP_MARKS.get(step.get("status", ""), "○")
                self._write(f"  {step.get('index')}. {mark} {step.get('title', '')}\n")
        elif event.phase == "step_started":
            title = next((s.get("title", "") for s in steps if s.get("index") == event.step), "")
            self._write(self.paint(f"▸ step {event.step}: {title}", BOLD) + "\n")
        elif event.phase == "step_finished":
            done = event.status == "done"
            mark = self.paint("✓", GREEN) if done else self.paint("✗", RED)
            self._write(f"{mark} step {event.step}: {event.summary or ''}\n")

    def _on_done(self, reason: str) -> None:
        self._enter("")
        if reason == "cancelled":
            self._write(self.paint("stopped.", YELLOW) + "\n")
        elif reason == "max_iterations":
            self._write(self.paint("stopped: too many model calls in one task.", YELLOW) + "\n")


def json_line(event: Event) -> str:
    """One event as the CLI's `--json` prints it: `{"event": NAME, ...payload}`."""
    return json.dumps({"event": event.name, **event.to_wire()}, ensure_ascii=False)
