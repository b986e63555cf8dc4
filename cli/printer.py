"""Renders task events in a terminal: the answer, dimmed thinking, one line per tool call and
its result, command output as it comes (once), diffs in colour, a plan's checklist, and a
sub-agent's output indented under the call that delegated to it.

The answer goes to `out`; everything else goes to `progress` and errors to `err`. Under `-p`
(`final_only`) the answer streams to `progress` (stderr) with the rest, the words between tool
calls included, and `out` (stdout) gets the final answer alone, once the task has completed
(not again when both end in the same terminal, file or pipe: it is there already); the error
a task ends on is left to `-p`'s last line. On a
terminal that takes colour the answer is rendered as Markdown by `rich` (cli/markdown.py,
imported on first use) and a spinner shows while the model has not answered; elsewhere the
answer is written exactly as the model wrote it.
"""

from __future__ import annotations

import os
import shutil
from typing import TYPE_CHECKING, TextIO

from cli.painter import BOLD, CYAN, DIM, GREEN, RED, YELLOW, Painter
from cli.streams import LineState, context_line
from core.approval import made_visible
from core.spend import spend_text
from protocol.events import (
    ContextEvent,
    Done,
    Error,
    Event,
    Notice,
    PlanEvent,
    Status,
    Thinking,
    Token,
    ToolEvent,
    UserMessage,
)

if TYPE_CHECKING:
    from rich.console import Console

    from cli.markdown import MarkdownStream, Waiting

RESULT_PREVIEW_LINES = 12
PLAIN_ARGS_CHARS = 400  # of a tool call's arguments on its line, when there is no screen width
INDENT = "  "  # per level of sub-agent
GUTTER = "│ "  # before each line of a command's live output
STEP_MARKS = {"pending": "○", "running": "◐", "done": "✓", "failed": "✗"}
PROMPT = "› "  # before what the user types, and before a message another window sent
PLAN_TOOLS = {"make_plan", "finish_step"}  # the plan's lines say it all; only a failure shows


class EventPrinter(Painter):
    """Turns docs/protocol.md §4 events into terminal output; one instance per terminal."""

    def __init__(
        self,
        out: TextIO,
        err: TextIO,
        *,
        color: bool,
        progress: TextIO | None = None,
        final_only: bool = False,
    ) -> None:
        super().__init__(color=color)
        self._outs: dict[int, LineState] = {}
        self._err = self._out(err)
        self._progress = self._out(progress if progress is not None else out)
        self._final_only = final_only
        self._answer = self._progress if final_only else self._out(out)
        # where the final answer is written when the task completes (`-p`), and its text so far
        self._final: LineState | None = None
        if final_only and not _same_terminal(out, self._progress.file):
            self._final = self._out(out)
        self._final_text = ""
        self._consoles: dict[int, Console] = {}
        self._section = ""  # "", "thinking", "answer", "args" or "output": what is being written
        self._section_out = self._progress
        self._speaker: tuple[str | None, str | None] = (None, None)  # (parent call, agent)
        self._announced: set[tuple[str | None, str | None]] = set()
        self._indent = ""
        self._answered = False  # this task wrote answer text already
        self._answer_message: str | None = None
        self._markdown: MarkdownStream | None = None
        self._waiting: Waiting | None = None
        self._args_room = 0  # characters the current tool line may still take
        self._streamed: set[str] = set()  # calls whose output was shown as it came

    def _out(self, file: TextIO) -> LineState:
        return self._outs.setdefault(id(file), LineState(file))

    def render(self, event: Event) -> None:
        self._stop_waiting()
        match event:
            case Status(state=state):
                if state == "thinking" and self.color and not event.depth:
                    self._enter("")
                    self._start_waiting()
            case Thinking(text=text):
                self._speak(event)
                self._enter("thinking")
                self._write(self._progress, self._visible(text), DIM)
            case Token():
                self._speak(event)
                self._on_token(event)
            case ToolEvent():
                self._speak(event)
                self._on_tool(event)
            case PlanEvent():
                self._speak(event)
                self._on_plan(event)
            case Error(code=code, message=message):
                if self._final_only and not event.depth:
                    return  # the task ends on it: `-p`'s last line, `error: …`, says it once
                self._enter("")
                self._err.write(self.paint(f"error ({code}): {message}", RED) + "\n")
            case Notice(message=message):
                self._enter("")
                self._err.write(self.paint(message, YELLOW) + "\n")
            case ContextEvent(phase="condensing" | "condensed"):  # a failure comes as a notice
                self._enter("")
                self._write(self._progress, context_line(event) + "\n", DIM)
            case Done(reason=reason):
                self._speak(event)
                self._on_done(reason)
                if not event.depth:
                    self._write(self._progress, spend_text(event.usage, event.cost) + "\n", DIM)
                if reason == "complete" and not event.depth:
                    self._write_final()
        for out in self._outs.values():
            out.file.flush()

    def prompt(self, event: UserMessage) -> None:
        """A message that started a task in another window, shown as if typed at the prompt
        (`/skill NAME` first when it ran with one), and the files it attached."""
        self._enter("")
        skill = f"/skill {event.skill} " if event.skill else ""
        text = self._visible(skill + event.text).replace("\n", "\n" + " " * len(PROMPT))
        self._write(self._progress, f"{PROMPT}{text}\n")
        names = [str(file.get("name") or file.get("path")) for file in event.attachments or []]
        if names:
            self._write(self._progress, f"attached: {', '.join(names)}\n", DIM)
        for out in self._outs.values():
            out.file.flush()

    def finish(self) -> None:
        """End the open line and stop anything still redrawn: the terminal is the user's again."""
        self._stop_waiting()
        self._enter("")
        for out in self._outs.values():
            out.end_line()
            out.file.flush()

    # --- where text goes ------------------------------------------------------------------

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
            self._write(self._progress, self.paint(f"↳ {event.agent}:", CYAN) + "\n")
        self._indent = INDENT * depth

    def _write(self, out: LineState, text: str, *styles: str, prefix: str = "") -> None:
        """Write text, each line after the current indent and `prefix` (lines painted one by
        one, so a colour never runs into the indent of the next)."""
        parts: list[str] = []
        line_start = out.line_start
        pieces = text.split("\n")
        for number, line in enumerate(pieces):
            if number:
                parts.append("\n")
                line_start = True
            if line:
                if line_start:
                    parts.append(self._indent + (self.paint(prefix, DIM) if prefix else ""))
                parts.append(self.paint(line, *styles))
                line_start = False
            elif prefix.strip() and line_start and number < len(pieces) - 1:  # an empty line
                parts.append(self._indent + self.paint(prefix.rstrip(), DIM))
        out.write("".join(parts))

    def _enter(self, section: str, out: LineState | None = None) -> None:
        """End what was being written when something else starts."""
        out = out or self._progress
        if section == self._section and out is self._section_out:
            return
        if self._markdown is not None:
            self._markdown.close()
            self._markdown = None
            self._answer.line_start = True
        self._section_out.end_line()
        self._section, self._section_out = section, out
        if section == "thinking":
            self._write(out, "thinking: ", DIM)

    def _visible(self, text: str) -> str:
        """Text from the model or a command as it may reach a terminal: control characters and
        invisible ones shown as marks (an escape sequence could rewrite the screen)."""
        return made_visible(text.replace("\r\n", "\n"))

    def _width(self) -> int:
        return shutil.get_terminal_size((100, 40)).columns

    def _fit(self, line: str, room: int) -> str:
        return line if len(line) <= room else line[: max(room - 1, 0)] + "…"

    def _console(self, out: LineState) -> Console:
        from cli.markdown import console_for

        key = id(out.file)
        if key not in self._consoles:
            self._consoles[key] = console_for(out.file)
        return self._consoles[key]

    def _start_waiting(self) -> None:
        from cli.markdown import Waiting

        self._waiting = Waiting(self._console(self._progress), "waiting for the model…")

    def _stop_waiting(self) -> None:
        if self._waiting is not None:
            self._waiting.stop()
            self._waiting = None

    # --- events ---------------------------------------------------------------------------

    def _on_token(self, event: Token) -> None:
        if event.depth:  # a sub-agent's words: progress, as written
            self._enter("answer")
            self._write(self._progress, self._visible(event.text))
            return
        if event.message_id != self._answer_message:
            self._final_text = ""
        self._final_text += event.text
        if self._section != "answer" or event.message_id != self._answer_message:
            self._enter("")  # the previous message's answer ends here
            self._enter("answer", self._answer)
            if self._answered:  # a new message: a new paragraph
                self._answer.write("\n")
            self._answered, self._answer_message = True, event.message_id
            if self.color:
                from cli.markdown import MarkdownStream

                self._markdown = MarkdownStream(self._console(self._answer))
        if self._markdown is not None:
            self._markdown.feed(self._visible(event.text.replace("\r", "")))
        else:
            self._answer.write(event.text)

    def _on_tool(self, event: ToolEvent) -> None:
        if event.tool in PLAN_TOOLS:
            if event.phase == "result" and not event.ok:
                self._print_result(event)
            return
        if event.phase == "start":
            if not event.depth:  # the words before it were not the final answer
                self._final_text = ""
            self._enter("args")
            self._progress.end_line()  # after the line of the turn's previous call
            self._write(self._progress, f"⚙ {event.tool} ", CYAN, BOLD)
            # "⚙ NAME " and one column spare: a line that fills the last one may wrap.
            self._args_room = (
                self._width() - len(self._indent) - len(event.tool) - 4
                if self.color
                else PLAIN_ARGS_CHARS
            )
        elif event.phase == "args":
            self._enter("args")
            self._tool_args(event.delta or "")
        elif event.phase == "approval":
            self._enter("")
        elif event.phase == "output":
            self._streamed.add(event.call_id)
            self._enter("output")
            text = self._visible((event.delta or "").replace("\r\n", "\n").replace("\r", "\n"))
            self._write(self._progress, text, DIM, prefix=GUTTER)
        elif event.phase == "result":
            self._print_result(event)

    def _tool_args(self, delta: str) -> None:
        """The call's arguments as they form, on its one line: cut with `…` at the edge."""
        if self._args_room <= 0:
            return
        text = self._visible(delta.replace("\n", " "))
        self._args_room -= len(text)
        if self._args_room < 0:
            text = text[: self._args_room - 1] + "…"
            self._args_room = 0
        self._write(self._progress, text, DIM)

    def _print_result(self, event: ToolEvent) -> None:
        self._enter("")
        if event.declined:  # it did not run: what the model is told of it is not for the user
            self._write(self._progress, self.paint(f"✗ {event.tool} declined", YELLOW) + "\n")
            return
        mark = self.paint("✓", GREEN) if event.ok else self.paint("✗", RED)
        head = f"{mark} {event.tool} ({event.duration_ms or 0} ms)"
        lines = (event.output or "").splitlines()
        proposal = (event.details or {}).get("proposal")
        if event.call_id in self._streamed:  # the output is on screen already: its status only
            self._streamed.discard(event.call_id)
            self._write(self._progress, head + (f": {lines[0]}" if lines else "") + "\n")
            return
        self._write(self._progress, head + "\n")
        if isinstance(proposal, dict):
            diff = str(proposal.get("diff", ""))
            verb = "create" if diff.startswith("--- /dev/null") else "change"
            title = (
                f"proposes to {verb} {proposal.get('path')} (nothing is written until "
                "you apply it):"
            )
            self._write(self._progress, self.paint(title, YELLOW) + "\n", prefix=INDENT)
            self._write(self._progress, self.diff(diff), prefix=INDENT)
            return
        room = self._width() - len(self._indent) - len(INDENT) if self.color else None
        for line in lines[:RESULT_PREVIEW_LINES]:
            shown = self._visible(line if room is None else self._fit(line, room))
            self._write(self._progress, self.paint(shown, DIM) + "\n", prefix=INDENT)
        if len(lines) > RESULT_PREVIEW_LINES:
            more = f"… {len(lines) - RESULT_PREVIEW_LINES} more lines"
            self._write(self._progress, self.paint(more, DIM) + "\n", prefix=INDENT)

    def _on_plan(self, event: PlanEvent) -> None:
        """The checklist when the plan is made or remade; one line when a step starts or ends."""
        steps = event.plan.get("steps") or []
        self._enter("")
        out = self._progress
        if event.phase in ("created", "replanned"):
            if event.phase == "replanned" and event.reason:
                self._write(out, self.paint(f"re-planning: {event.reason}", YELLOW) + "\n")
            revision = event.plan.get("revision", 0)
            self._write(out, self.paint(f"Plan (revision {revision}):", BOLD) + "\n")
            for step in steps:
                mark = STEP_MARKS.get(step.get("status", ""), "○")
                self._write(out, f"  {step.get('index')}. {mark} {step.get('title', '')}\n")
        elif event.phase == "step_started":
            title = next((s.get("title", "") for s in steps if s.get("index") == event.step), "")
            self._write(out, self.paint(f"▸ step {event.step}: {title}", BOLD) + "\n")
        elif event.phase == "step_finished":
            done = event.status == "done"
            mark = self.paint("✓", GREEN) if done else self.paint("✗", RED)
            self._write(out, f"{mark} step {event.step}: {event.summary or ''}\n")

    def _on_done(self, reason: str) -> None:
        self._enter("")
        if reason == "cancelled":
            self._write(self._progress, self.paint("stopped.", YELLOW) + "\n")
        elif reason == "max_iterations":
            self._write(
                self._progress,
                self.paint("stopped: too many model calls in one task.", YELLOW) + "\n",
            )
        elif reason == "budget" and not self._final_only:
            hint = "stopped: a budget is used up; /continue --raise LIMIT goes on, once."
            self._write(self._progress, self.paint(hint, YELLOW) + "\n")
        elif reason == "loop":
            self._write(
                self._progress, self.paint("stopped: the model repeated itself.", YELLOW) + "\n"
            )
        self._answered, self._answer_message = False, None
        self._streamed.clear()

    def _write_final(self) -> None:
        """The final answer on `out`, exactly as the model wrote it (`-p`)."""
        text, self._final_text = self._final_text, ""
        if self._final is not None and text:
            self._final.write(text)
            self._final.end_line()


def _same_terminal(a: TextIO, b: TextIO) -> bool:
    """Whether two streams end in the same place: one terminal (`-p` with neither redirected),
    or one file or pipe (`2>&1`), where the streamed answer is already."""
    try:
        return os.path.samestat(os.fstat(a.fileno()), os.fstat(b.fileno()))
    except (OSError, ValueError, AttributeError):
        return False
