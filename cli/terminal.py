"""CliTerminal: the agent core in a terminal, its events printed and its approvals asked there."""

from __future__ import annotations

import queue
import sys
import threading
from typing import Any, TextIO

from cli.command_texts import ALLOW_QUESTION, no_terminal_to_ask
from cli.painter import YELLOW
from cli.printer import EventPrinter
from cli.streams import json_line, use_color
from core.main_terminal import MainTerminal
from core.services import AgentServices
from modules.uploads.attachments import Attachment
from protocol.budgets import BudgetOverride
from protocol.events import Done, DoneReason, Error, Event, ToolEvent


class CliTerminal(MainTerminal):
    """Prints events as text (or JSON lines) and asks approvals on the terminal.

    `one_shot` (`-p`): only the final answer goes to `out`; everything else goes to `err`.
    """

    def __init__(
        self,
        services: AgentServices,
        conversation_id: str | None = None,
        *,
        json_mode: bool = False,
        out: TextIO = sys.stdout,
        err: TextIO = sys.stderr,
        stdin: TextIO = sys.stdin,
        one_shot: bool = False,
    ) -> None:
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
        self.attachments: list[Attachment] = []  # for the next message (/attach)
        self.listed: list[str] = []  # the ids the last /history list numbered
        # approvals to ask; None: the task's worker has ended (the wait ends at once)
        self._approvals: queue.Queue[ToolEvent | None] = queue.Queue()
        super().__init__(services, conversation_id, sink=self._show)

    def _show(self, event: Event) -> None:
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
            self._approvals.put(event)  # asked once the printer is done with the screen

    def run_foreground(
        self, text: str, budget_override: BudgetOverride | None = None
    ) -> DoneReason:
        """Run one task in a worker thread; Ctrl-C stops it, approvals are asked here.

        A text starting `/skill NAME` runs with that skill's instructions; `budget_override`
        raises a budget for this task.
        """
        self.last_error = ""
        self.declined = []
        skill, text = split_skill(text)
        task = self.begin_task(
            text,
            skill=skill,
            attachments=[a.to_meta() for a in self.attachments] or None,
            budget_override=budget_override,
        )
        self.attachments = []
        outcome: list[DoneReason] = []

        def work() -> None:
            try:
                outcome.append(self.run_task(task))
            finally:
                self._approvals.put(None)

        worker = threading.Thread(target=work, name="agent-task", daemon=True)
        worker.start()
        while True:
            try:
                request = self._approvals.get()  # Ctrl-C interrupts the wait
                if request is None:
                    break
                self._ask(request)
            except KeyboardInterrupt:
                self.cancel()
        worker.join()
        if not self.json_mode:
            self.printer.finish()
        return outcome[0]

    def compact_foreground(self, instructions: str) -> str:
        """Condense the history now, in a worker thread; Ctrl-C stops it."""
        cancel = self.begin_compaction(instructions or None)
        assert cancel is not None  # no task runs while the prompt is shown
        outcome: list[str] = []
        worker = threading.Thread(
            target=lambda: outcome.append(self.run_compaction(cancel, instructions or None)),
            name="condense",
            daemon=True,
        )
        worker.start()
        while worker.is_alive():
            try:
                worker.join(0.1)
            except KeyboardInterrupt:
                self.cancel()
        if not self.json_mode:
            self.printer.finish()
        if outcome and outcome[0] == "condensed":
            return "the older turns are summarised; /status shows the context now"
        return "the context stays as it was"

    def _ask(self, request: ToolEvent) -> None:
        """Show what the call would do and ask; Ctrl-C or Ctrl-D at the prompt declines."""
        if not self.stdin.isatty():
            said, why = no_terminal_to_ask(request.tool, request.warnings)
            self.err.write(said)
            self._decline(request, why)
            return
        self.err.write(self.printer.approval_text(request))
        self.err.write(ALLOW_QUESTION)
        self.err.flush()
        try:
            answer = self.stdin.readline()
        except KeyboardInterrupt:
            answer = ""
        if not answer.endswith("\n"):  # Ctrl-C or Ctrl-D: the line was left open
            self.err.write("\n")
        answer = answer.strip().lower()
        if answer in ("y", "yes", "a", "always"):
            self.approve(request.call_id, True, always=answer in ("a", "always"))
            return
        self.err.write(self.printer.paint(f"declined: {request.tool} does not run.", YELLOW) + "\n")
        self.err.flush()
        self._decline(request, f"you declined {request.tool}")

    def _decline(self, request: ToolEvent, why: str) -> None:
        self.declined.append(why)
        self.approve(request.call_id, False)


def split_skill(text: str) -> tuple[str | None, str]:
    """(skill, message) of a `/skill NAME message` line; (None, text) for any other text."""
    if not text.startswith("/skill "):
        return None, text
    name, _, rest = text.removeprefix("/skill ").strip().partition(" ")
    return name, rest.strip() or f"Follow the {name} skill."
