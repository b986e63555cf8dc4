"""While the remote terminal waits at its prompt, a task another window (a page, another client)
runs in its conversation streams here too: its lines are printed above the input line, the
line being typed redrawn under them, and its approvals are asked at the prompt (`y`, `n` or
`a` answers the oldest waiting one; a page may answer first).

Lines are printed whole (a line still being written waits for its end), in plain text: the
prompt's line stays the user's.
"""

from __future__ import annotations

import io
import sys
import threading
from collections.abc import Callable
from types import ModuleType
from typing import TextIO

from cli.printer import PROMPT, EventPrinter
from cli.remote_terminal import RemoteTerminal
from protocol.events import Done, Event, ToolEvent, UserMessage
from workspace_client import Reloaded

ANSWERS = {"y": True, "yes": True, "n": False, "no": False, "a": "always", "always": "always"}
CLEAR_LINE = "\r\033[K"


class IdleFollower:
    """Shows the terminal's conversation's events while no task of its own is shown."""

    def __init__(self, terminal: RemoteTerminal, out: TextIO = sys.stdout) -> None:
        self.terminal, self.out = terminal, out
        self._sink = io.StringIO()
        self._printer = EventPrinter(self._sink, self._sink, color=False)
        self._lock = threading.Lock()
        self._waiting: dict[str, ToolEvent] = {}  # approvals asked at the prompt, by call id
        self._followed: str | None = None
        self._unsubscribe: Callable[[], None] | None = None
        self._readline = _line_editor(out)
        self._reading = False

    def read_line(self) -> str:
        """The next line typed at the prompt; the conversation's events print meanwhile."""
        self._follow(self.terminal.conversation_id)
        with self._lock:
            self._reading = True
        try:
            return input(PROMPT)
        finally:
            with self._lock:
                self._reading = False

    def answer(self, line: str) -> bool:
        """Whether the line answered an approval asked at the prompt (and it is answered)."""
        verdict = ANSWERS.get(line.strip().lower())
        with self._lock:
            if verdict is None or not self._waiting:
                return False
            request = next(iter(self._waiting.values()))
            del self._waiting[request.call_id]
        self.terminal.give_answer(request, verdict is not False, always=verdict == "always")
        if verdict is False:
            self.out.write(f"declined: {request.tool} does not run.\n")
        return True

    def close(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()

    def _follow(self, conversation_id: str | None) -> None:
        if conversation_id == self._followed:
            return
        self.close()
        self._followed, self._unsubscribe = conversation_id, None
        with self._lock:
            self._waiting.clear()
        if conversation_id is not None:
            self._unsubscribe = self.terminal.client.subscribe(conversation_id, self._on_event)

    def _on_event(self, event: Event) -> None:
        """On the client's reader thread: print what the event shows, whole lines only."""
        if self.terminal.watching or self.terminal.json_mode:
            return
        notes: list[str] = []
        with self._lock:
            if isinstance(event, Reloaded):
                notes.append("reconnected: the server could not replay what was missed")
            elif isinstance(event, UserMessage):
                self._printer.prompt(event)
            else:
                self._printer.render(event)
            if isinstance(event, ToolEvent) and event.phase == "approval":
                self._waiting[event.call_id] = event
                notes.append(
                    self._printer.approval_text(event)
                    + "Allow? [y]es / [n]o / [a]lways for this tool: type it at the prompt "
                    "(a page may answer first)"
                )
            elif self._waiting and _settles(event, self._waiting):
                notes.append("answered in another window.")
                if isinstance(event, ToolEvent):
                    del self._waiting[event.call_id]
                else:
                    self._waiting.clear()
            if isinstance(event, Done) and event.depth is None:
                self._printer.finish()
            text = self._sink.getvalue()
            whole, _, tail = text.rpartition("\n")
            self._sink.seek(0)
            self._sink.truncate()
            self._sink.write(tail)
            lines = (whole + "\n" if whole else "") + "".join(note + "\n" for note in notes)
            if lines:
                self._print_above(lines)

    def _print_above(self, lines: str) -> None:
        """Lines above the input line; the prompt and what is typed so far drawn again."""
        if not self._reading or self._readline is None:
            self.out.write(lines)
        else:
            self.out.write(CLEAR_LINE + lines + PROMPT + self._readline.get_line_buffer())
        self.out.flush()


def _settles(event: Event, waiting: dict[str, ToolEvent]) -> bool:
    """Whether a call asked at the prompt no longer waits: it runs (someone answered), or the
    task ended."""
    if isinstance(event, ToolEvent):
        return event.phase in ("output", "result") and event.call_id in waiting
    return isinstance(event, Done) and event.depth is None


def _line_editor(out: TextIO) -> ModuleType | None:
    """readline when input() edits lines with it (both ends a terminal); None otherwise."""
    if not (sys.stdin.isatty() and out.isatty()):
        return None
    try:
        import readline
    except ImportError:
        return None
    return readline
