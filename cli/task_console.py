"""What the local and the remote terminal share of showing a task: its events printed (or as
JSON lines), what its end needs kept, and its approvals asked at the prompt while the task's
worker runs. A terminal says how an answer is read and how it is given."""

from __future__ import annotations

import abc
import queue
import signal
import threading
from collections.abc import Callable
from typing import Any, TextIO

from cli.command_texts import ALLOW_QUESTION, no_terminal_to_ask
from cli.painter import YELLOW
from cli.printer import EventPrinter
from cli.streams import json_line, use_color
from protocol.events import Done, Error, Event, ToolEvent

# How often the main thread stops waiting to look for a Ctrl-C. The kernel may hand SIGINT to
# any thread (another one, when the main thread already has a signal pending); Python then runs
# its handler only when the main thread next runs, which an untimed wait would never do.
SIGNAL_LOOK_SECONDS = 0.2


def handle_pending_signals() -> None:
    """Run here (the main thread) the handler of a signal another thread took: Ctrl-C raises
    KeyboardInterrupt. CPython 3.11 may otherwise leave it unrun however often the main thread
    wakes: another thread that recomputes the interpreter's eval breaker drops its note of a
    pending signal (3.12 recomputes it for the main thread). pthread_sigmask looks for tripped
    signals after changing the mask, here by blocking nothing more."""
    signal.pthread_sigmask(signal.SIG_BLOCK, ())


class TaskConsole(abc.ABC):
    """A task shown and its approvals asked on this terminal.

    `one_shot` (`-p`): only the final answer goes to `out`; everything else goes to `err`.
    """

    def open_console(
        self, out: TextIO, err: TextIO, stdin: TextIO, *, json_mode: bool, one_shot: bool
    ) -> None:
        """Set up the streams and the printer; a terminal calls it first."""
        self.json_mode = json_mode
        self.out, self.err, self.stdin = out, err, stdin
        progress = err if one_shot else out
        self.printer = EventPrinter(
            out,
            err,
            progress=progress,
            color=use_color(out) and use_color(progress),
            final_only=one_shot,
        )
        self.last_error = ""
        self.last_budget: dict[str, Any] | None = None  # the last task's done.budget
        self.declined: list[str] = []  # of the last task: why each declined call was
        self.listed: list[str] = []  # the ids the last /history list numbered
        # approvals to ask; None: the task's worker has ended (the wait ends at once)
        self._approvals: queue.Queue[ToolEvent | None] = queue.Queue()

    def print_event(self, event: Event) -> None:
        """Keep what the task's end needs, print the event; an approval is asked once the
        printer is done with the screen."""
        if isinstance(event, Error):
            self.last_error = f"{event.code}: {event.message}"
        elif isinstance(event, Done) and event.depth is None:
            self.last_budget = event.budget
        if self.json_mode:
            self.out.write(json_line(event) + "\n")
            self.out.flush()
        else:
            self.printer.render(event)
        if isinstance(event, ToolEvent) and event.phase == "approval":
            self._approvals.put(event)

    def run_asking(self, work: Callable[[], object], name: str, stop: Callable[[], object]) -> None:
        """Run `work` (a task shown) in a worker thread and ask its approvals here until it
        ends; Ctrl-C calls `stop`."""
        self.last_error, self.declined = "", []

        def run() -> None:
            try:
                work()
            finally:
                self._approvals.put(None)

        worker = threading.Thread(target=run, name=name, daemon=True)
        worker.start()
        while True:
            try:
                handle_pending_signals()
                request = self._approvals.get(timeout=SIGNAL_LOOK_SECONDS)
            except queue.Empty:
                continue
            except KeyboardInterrupt:
                stop()
                continue
            if request is None:
                break
            try:
                self._ask(request)
            except KeyboardInterrupt:
                stop()
        worker.join()
        if not self.json_mode:
            self.printer.finish()

    def _ask(self, request: ToolEvent) -> None:
        """Show what the call would do and ask; Ctrl-C or Ctrl-D at the prompt declines."""
        if not self.stdin.isatty():
            said, why = no_terminal_to_ask(request.tool, request.warnings)
            self.err.write(said)
            self._decline(request, why)
            return
        try:  # from the moment the question can show, Ctrl-C answers it
            self.err.write(self.printer.approval_text(request))
            self.err.write(ALLOW_QUESTION)
            self.err.flush()
            answer = self.read_answer(request)
        except KeyboardInterrupt:
            answer = ""
        if answer is None:
            return
        if not answer.endswith("\n"):  # Ctrl-C or Ctrl-D: the line was left open
            self.err.write("\n")
        answer = answer.strip().lower()
        if answer in ("y", "yes", "a", "always"):
            self.give_answer(request, True, always=answer in ("a", "always"))
            return
        self.err.write(self.printer.paint(f"declined: {request.tool} does not run.", YELLOW) + "\n")
        self.err.flush()
        self._decline(request, f"you declined {request.tool}")

    def _decline(self, request: ToolEvent, why: str) -> None:
        self.declined.append(why)
        self.give_answer(request, False)

    @abc.abstractmethod
    def read_answer(self, request: ToolEvent) -> str | None:
        """The line typed at the approval's prompt (Ctrl-C raises KeyboardInterrupt); None when
        the call was answered elsewhere meanwhile."""

    @abc.abstractmethod
    def give_answer(self, request: ToolEvent, approved: bool, *, always: bool = False) -> None:
        """Send the answer to the call that waits."""
