"""CliTerminal: the agent core in a terminal, its events printed and its approvals asked there."""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Any, TextIO

from cli.task_console import SIGNAL_LOOK_SECONDS, TaskConsole, handle_pending_signals
from core.main_terminal import MainTerminal
from core.services import AgentServices
from core.settings_editor import SettingsEditor
from modules.results import ToolError
from modules.uploads.attachments import Attachment
from protocol.budgets import BudgetOverride
from protocol.events import DoneReason, ToolEvent


class CliTerminal(TaskConsole, MainTerminal):
    """The agent core in this terminal: events printed as text (or JSON lines), approvals
    asked here. `one_shot` (`-p`): only the final answer goes to `out`."""

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
        self.open_console(out, err, stdin, json_mode=json_mode, one_shot=one_shot)
        self.attachments: list[Attachment] = []  # for the next message (/attach)
        super().__init__(services, conversation_id, sink=self.print_event)

    def run_foreground(
        self, text: str, budget_override: BudgetOverride | None = None
    ) -> DoneReason:
        """Run one task in a worker thread; Ctrl-C stops it, approvals are asked here.

        A text starting `/skill NAME` runs with that skill's instructions; `budget_override`
        raises a budget for this task.
        """
        skill, text = split_skill(text)
        task = self.begin_task(
            text,
            skill=skill,
            attachments=[a.to_meta() for a in self.attachments] or None,
            budget_override=budget_override,
        )
        self.attachments = []
        outcome: list[DoneReason] = []
        self.run_asking(lambda: outcome.append(self.run_task(task)), "agent-task", self.cancel)
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
                handle_pending_signals()
                worker.join(SIGNAL_LOOK_SECONDS)
            except KeyboardInterrupt:
                self.cancel()
        if not self.json_mode:
            self.printer.finish()
        if outcome and outcome[0] == "condensed":
            return "the older turns are summarised; /status shows the context now"
        return "the context stays as it was"

    def attach(self, path: str) -> str:
        """Attach a workspace file, or one outside copied into the upload folder."""
        store, workspace = self.services.attachments, self.services.workspace
        try:
            rel: str | None = workspace.relative(workspace.resolve(path))
        except ToolError:
            rel = None
        outside = Path(path).expanduser()
        if rel is not None and workspace.lstat(rel, follow=True) is not None:
            [attachment] = store.attach([rel])
        elif outside.is_file():
            attachment = store.import_file(outside)
        else:
            raise ValueError(f"no such file: {path}")
        self.attachments.append(attachment)
        return _shown(attachment)

    def attached(self) -> list[str]:
        return [_shown(attachment) for attachment in self.attachments]

    def revoke(self, tool: str) -> bool:
        return self.gate.revoke(tool)

    def approvals(self) -> tuple[str, list[str], str]:
        return self.approval, self.gate.allowed(), "session"

    def user_settings(self, changes: dict[str, Any] | None = None) -> dict[str, Any]:
        editor = SettingsEditor(self.services)
        return editor.view() if changes is None else editor.update(changes)

    def read_answer(self, request: ToolEvent) -> str:
        return self.stdin.readline()

    def give_answer(self, request: ToolEvent, approved: bool, *, always: bool = False) -> None:
        self.approve(request.call_id, approved, always=always)


def _shown(attachment: Attachment) -> str:
    return f"{attachment.path} ({attachment.label()})"


def split_skill(text: str) -> tuple[str | None, str]:
    """(skill, message) of a `/skill NAME message` line; (None, text) for any other text."""
    if not text.startswith("/skill "):
        return None, text
    name, _, rest = text.removeprefix("/skill ").strip().partition(" ")
    return name, rest.strip() or f"Follow the {name} skill."
