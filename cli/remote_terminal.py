"""The remote terminal's state and its tasks: a conversation of a web workspace shown as the
local terminal shows its own (cli/printer.py), its approvals asked here while pages may answer
them first."""

from __future__ import annotations

import contextlib
import os
import queue
import select
import sys
import threading
from typing import Any, TextIO

from cli.command_texts import ALLOW_QUESTION, no_terminal_to_ask
from cli.history import pick_conversation
from cli.painter import DIM, YELLOW
from cli.printer import EventPrinter
from cli.streams import json_line, use_color
from cli.terminal import split_skill
from protocol.budgets import BudgetOverride
from protocol.events import Done, DoneReason, Error, Event, Status, ToolEvent
from workspace_client import Client, Disconnected, Reloaded, WorkspaceError

ANY_CALL = "*"  # in RemoteTerminal._settled: the task ended, no call waits


class RemoteTerminal:
    """A conversation of a web workspace in the terminal: prints its events as the local
    terminal does (or JSON lines) and asks its approvals here while pages may answer them too.

    `one_shot` (`-p`): only the final answer goes to `out`; everything else goes to `err`.
    """

    def __init__(
        self,
        client: Client,
        *,
        json_mode: bool = False,
        out: TextIO = sys.stdout,
        err: TextIO = sys.stderr,
        stdin: TextIO = sys.stdin,
        one_shot: bool = False,
        mode: str | None = None,
        approval: str | None = None,
        agent: str | None = None,
    ) -> None:
        self.client = client
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
        self.conversation_id: str | None = None
        # what the next task runs with; None: the conversation's own, or the server's default
        self.mode, self.approval, self.agent = mode, approval, agent
        self.focus: list[str] = []  # the files a new conversation starts with in focus
        self.attachments: list[str] = []  # workspace paths, for the next message
        self.listed: list[str] = []  # the ids the last /history list numbered
        self.last_error = ""
        self.last_budget: dict[str, Any] | None = None
        self.declined: list[str] = []
        self.iteration = 0
        self._approvals: queue.Queue[ToolEvent | None] = queue.Queue()
        self._settled: set[str] = set()  # calls no longer waiting (answered, or the task ended)
        self._lock = threading.Lock()
        self._wake_r, self._wake_w = os.pipe()  # a byte when a call is settled elsewhere
        self.watching = False  # a task is shown by watch(): cli/remote_follow.py stays quiet

    # --- tasks ----------------------------------------------------------------------

    def run_foreground(
        self, text: str, budget_override: BudgetOverride | None = None
    ) -> DoneReason:
        """Send the message (`/skill NAME message` runs with that skill) and show its task until
        it ends; Ctrl-C cancels it. Raises WorkspaceError when the server refuses it."""
        skill, text = split_skill(text)
        options: dict[str, Any] = {
            key: value
            for key, value in (("mode", self.mode), ("approval", self.approval))
            if value is not None
        }
        if self.agent is not None:
            options["agent"] = self.agent
        if skill is not None:
            options["skill"] = skill
        if self.attachments:
            options["attachments"] = self.attachments
        if self.focus and self.conversation_id is None:
            options["focus"] = self.focus
        if budget_override is not None:
            options["budget_override"] = budget_override.model_dump(mode="json")
        self.watching = True
        try:
            started = self.client.send(text, self.conversation_id, **options)
        except BaseException:
            self.watching = False
            raise
        self.conversation_id = started.conversation_id
        self.attachments, self.focus = [], []
        return self.watch(started.conversation_id)

    def watch(self, conversation_id: str) -> DoneReason:
        """Print the conversation's task (the running one from its start, when it was not
        followed yet) until its end; approvals are asked here, Ctrl-C cancels it."""
        self.last_error, self.declined, self.watching = "", [], True
        with self._lock:
            self._settled.clear()
        ends: list[DoneReason] = []

        def work() -> None:
            try:
                for event in self.client.events(conversation_id):
                    self._show(event)
                    if isinstance(event, Done) and event.depth is None:
                        ends.append(event.reason)
            except Disconnected as exc:
                self.last_error = f"disconnected: {exc}"
                self.err.write(f"error: {self.last_error}\n")
            finally:
                self._approvals.put(None)

        worker = threading.Thread(target=work, name="remote-task", daemon=True)
        worker.start()
        while True:
            try:
                request = self._approvals.get()  # Ctrl-C interrupts the wait
                if request is None:
                    break
                self._ask(request)
            except KeyboardInterrupt:
                with contextlib.suppress(WorkspaceError):  # not_running: it ended meanwhile
                    self.client.cancel(conversation_id)
        worker.join()
        if not self.json_mode:
            self.printer.finish()
        self.watching = False
        return ends[0] if ends else "error"

    def _show(self, event: Event) -> None:
        if isinstance(event, Error):
            self.last_error = f"{event.code}: {event.message}"
        elif isinstance(event, Status):
            self.iteration = event.iteration
        elif isinstance(event, Done) and event.depth is None:
            self.last_budget = event.budget
        if self.json_mode:
            self.out.write(json_line(event) + "\n")
            self.out.flush()
        elif isinstance(event, Reloaded):
            note = "reconnected: the server could not replay what was missed; /history shows it"
            self.err.write(self.printer.paint(note, DIM) + "\n")
        else:
            self.printer.render(event)
        if isinstance(event, ToolEvent) and event.phase == "approval":
            self._approvals.put(event)
        elif _settles(event):
            with self._lock:
                self._settled.add(event.call_id if isinstance(event, ToolEvent) else ANY_CALL)
            os.write(self._wake_w, b".")

    def _ask(self, request: ToolEvent) -> None:
        """The local terminal's prompt; a page that answers first ends it."""
        if not self.stdin.isatty():
            said, why = no_terminal_to_ask(request.tool, request.warnings)
            self.err.write(said)
            self._decline(request, why)
            return
        self.err.write(self.printer.approval_text(request))
        self.err.write(ALLOW_QUESTION)
        self.err.flush()
        answer = self._answer(request.call_id)
        if answer is None:
            self.err.write("\n" + self.printer.paint("answered in another window.", DIM) + "\n")
            return
        if not answer.endswith("\n"):  # Ctrl-C or Ctrl-D: the line was left open
            self.err.write("\n")
        answer = answer.strip().lower()
        if answer in ("y", "yes", "a", "always"):
            self.approve(request, True, always=answer in ("a", "always"))
            return
        self.err.write(self.printer.paint(f"declined: {request.tool} does not run.", YELLOW) + "\n")
        self.err.flush()
        self._decline(request, f"you declined {request.tool}")

    def _answer(self, call_id: str) -> str | None:
        """The line typed at the prompt; None once the call is settled elsewhere."""
        try:
            while True:
                with self._lock:
                    if call_id in self._settled or ANY_CALL in self._settled:
                        return None
                typed = self.stdin.fileno()
                ready, _, _ = select.select([typed, self._wake_r], [], [])
                if self._wake_r in ready:
                    os.read(self._wake_r, 4096)
                if typed in ready:
                    return self.stdin.readline()
        except KeyboardInterrupt:
            return ""

    def _decline(self, request: ToolEvent, why: str) -> None:
        self.declined.append(why)
        self.approve(request, False)

    def approve(self, request: ToolEvent, approved: bool, *, always: bool = False) -> None:
        assert request.conversation_id is not None
        try:
            self.client.approve(request.conversation_id, request.call_id, approved, always=always)
        except WorkspaceError as exc:
            if exc.code != "not_waiting":
                raise
            self.err.write(self.printer.paint("it was answered in another window.", DIM) + "\n")

    # --- conversations --------------------------------------------------------------

    def open(self, conversation_id: str) -> dict[str, Any]:
        """Make the conversation this terminal's; its mode, approval and agent are the next
        task's. Returns the get_conversation answer."""
        conversation = self.client.get_conversation(conversation_id)
        self.conversation_id = conversation_id
        self.mode, self.approval = conversation["mode"], conversation["approval"]
        self.agent = conversation["agent"]
        self.focus, self.attachments = [], []
        return conversation

    def find(self, ref: str) -> str:
        rows = self.client.conversations()
        ids = {str(row["id"]) for row in rows}
        return pick_conversation(ref, rows, self.listed, ids.__contains__)


def _settles(event: Event) -> bool:
    """Whether the event shows a call no longer waits: it runs or has its result (someone
    answered), or the task ended."""
    if isinstance(event, ToolEvent):
        return event.phase in ("output", "result")
    return isinstance(event, Done) and event.depth is None
