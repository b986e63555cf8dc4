"""The remote terminal's state and its tasks: a conversation of a web workspace shown as the
local terminal shows its own (cli/printer.py), its approvals asked here while pages may answer
them first."""

from __future__ import annotations

import contextlib
import os
import select
import sys
import threading
from pathlib import Path
from typing import Any, TextIO

from cli.history import pick_conversation
from cli.painter import DIM
from cli.task_console import TaskConsole
from cli.terminal import split_skill
from protocol.budgets import BudgetOverride
from protocol.events import Done, DoneReason, Event, Status, ToolEvent, UserMessage
from protocol.options import MAX_FOCUS
from workspace_client import Client, Disconnected, Reloaded, WorkspaceError

ANY_CALL = "*"  # in RemoteTerminal._settled: the task ended, no call waits


class RemoteTerminal(TaskConsole):
    """A conversation of a web workspace in the terminal: prints its events as the local
    terminal does (or JSON lines) and asks its approvals here while pages may answer them too.
    `one_shot` (`-p`): only the final answer goes to `out`."""

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
        self.open_console(out, err, stdin, json_mode=json_mode, one_shot=one_shot)
        self.client = client
        self.conversation_id: str | None = None
        # what the next task runs with; None: the conversation's own, or the server's default
        self.mode, self.approval, self.agent = mode, approval, agent
        self.focus: list[str] = []  # the files a new conversation starts with in focus
        self.attachments: list[str] = []  # workspace paths, for the next message
        self.iteration = 0
        self._settled: set[str] = set()  # calls no longer waiting (answered, or the task ended)
        self._lock = threading.Lock()
        self._wake_r, self._wake_w = os.pipe()  # a byte when a call is settled elsewhere
        self.watching = False  # a task is shown by watch(): cli/remote_follow.py stays quiet
        self._typed_here: str | None = None  # the id of the last message sent from here

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
        self._typed_here = started.message_id
        self.attachments, self.focus = [], []
        return self.watch(started.conversation_id)

    def watch(self, conversation_id: str) -> DoneReason:
        """Print the conversation's task (the running one from its start, when it was not
        followed yet) until its end; approvals are asked here, Ctrl-C cancels it."""
        self.watching = True
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

        def stop() -> None:
            with contextlib.suppress(WorkspaceError):  # not_running: it ended meanwhile
                self.client.cancel(conversation_id)

        self.run_asking(work, "remote-task", stop)
        self.watching = False
        return ends[0] if ends else "error"

    def _show(self, event: Event) -> None:
        if isinstance(event, Status):
            self.iteration = event.iteration
        if isinstance(event, Reloaded) and not self.json_mode:
            note = "reconnected: the server could not replay what was missed; /history shows it"
            self.err.write(self.printer.paint(note, DIM) + "\n")
        elif isinstance(event, UserMessage) and not self.json_mode:
            if event.message_id != self._typed_here:  # a message typed here is on screen
                self.printer.prompt(event)
        else:
            self.print_event(event)
        if _settles(event):
            with self._lock:
                self._settled.add(event.call_id if isinstance(event, ToolEvent) else ANY_CALL)
            os.write(self._wake_w, b".")

    def read_answer(self, request: ToolEvent) -> str | None:
        """The line typed at the prompt; None once a page answered the call first."""
        answer = self._typed(request.call_id)
        if answer is None:
            self.err.write("\n" + self.printer.paint("answered in another window.", DIM) + "\n")
        return answer

    def _typed(self, call_id: str) -> str | None:
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

    def give_answer(self, request: ToolEvent, approved: bool, *, always: bool = False) -> None:
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

    def needs_conversation(self) -> str:
        """The open conversation's id; ValueError when there is none yet."""
        if self.conversation_id is None:
            raise ValueError("no conversation yet: send a message, or open one with /history")
        return self.conversation_id

    def set_focus(self, path: str, focused: bool) -> list[str]:
        """Focus or unfocus a file: in the open conversation, or for the next one to start
        with (a path the server's workspace has); returns the focus list."""
        if self.conversation_id is not None:
            op = "focus_file" if focused else "unfocus_file"
            ack = self.client.call(op, {"conversation_id": self.conversation_id, "path": path})
            return list(ack["focus"])
        if focused and path not in self.focus:
            if len(self.focus) >= MAX_FOCUS:
                raise ValueError(f"at most {MAX_FOCUS} files are in focus")
            self.client.read_file(path)  # not_found for a path that is no workspace file
            self.focus.append(path)
        elif not focused:
            if path not in self.focus:
                raise ValueError(f"{path} is not in focus")
            self.focus.remove(path)
        return list(self.focus)

    def attach(self, path: str) -> str:
        """Attach a file of this machine (uploaded into the workspace's upload folder) or of
        the server's workspace."""
        local = Path(path).expanduser()
        if local.is_file():
            shown = str(self.client.upload(local)["path"])
        else:
            try:
                shown = str(self.client.read_file(path)["path"])
            except WorkspaceError:
                raise ValueError(
                    f"no such file here or in the server's workspace: {path}"
                ) from None
        self.attachments.append(shown)
        return shown

    def attached(self) -> list[str]:
        return list(self.attachments)

    def revoke(self, tool: str) -> bool:
        payload = {"conversation_id": self.needs_conversation(), "tool": tool}
        try:
            self.client.call("revoke_approval", payload)
        except WorkspaceError as exc:
            if exc.code != "not_found":
                raise
            return False
        return True

    def approvals(self) -> tuple[str, list[str], str]:
        status = self.client.status(self.conversation_id)
        allowed = list(status.get("always_allowed") or [])
        return self.approval or status["approval"], allowed, "conversation"

    def user_settings(self, changes: dict[str, Any] | None = None) -> dict[str, Any]:
        client = self.client
        try:
            return client.settings() if changes is None else client.set_settings(**changes)
        except WorkspaceError as exc:
            raise ValueError(exc.message) from None

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
