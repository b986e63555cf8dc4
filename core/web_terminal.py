"""The web front of the core: events go to the conversation's room and into a replay log."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from core.main_terminal import MainTerminal, TaskBusy
from core.services import AgentServices
from utils.settings import Approval, Mode

Send = Callable[[str, dict[str, Any], str], None]  # (event, payload, room)


class WebTerminal(MainTerminal):
    """One per conversation; keeps the events of its running or last task for `join`."""

    def __init__(self, services: AgentServices, conversation_id: str | None, *, send: Send) -> None:
        super().__init__(services, conversation_id)
        self._send = send
        self._log: list[tuple[str, dict[str, Any]]] = []

    def emit(self, event: str, payload: dict[str, Any]) -> None:
        self._log.append((event, payload))
        self._send(event, payload, payload["conversation_id"])

    def begin_task(self, text: str, *, parent_id: str | None = None) -> dict[str, Any]:
        record = super().begin_task(text, parent_id=parent_id)
        with self._emit_lock:
            self._log = []
        return record

    def start(
        self, text: str, *, parent_id: str | None, mode: Mode | None, approval: Approval | None,
        run_in_background: Callable[..., Any],
    ) -> dict[str, Any]:
        """Begin a task and run it in the background; raises TaskBusy or KeyError."""
        if self.running:
            raise TaskBusy("a task is already running in this conversation")
        self.mode = mode or self.mode
        self.approval = approval or self.approval
        record = self.begin_task(text, parent_id=parent_id)
        run_in_background(self.run_task, record)
        return record

    def replay(self, after_seq: int, deliver: Callable[[str, dict[str, Any]], None]) -> None:
        """Hand every logged event with seq > after_seq to `deliver`, with no live event between."""
        with self._emit_lock:
            for event, payload in self._log:
                if payload["seq"] > after_seq:
                    deliver(event, payload)


class TerminalHub:
    """The WebTerminal of each conversation, created on first use."""

    def __init__(self, services: AgentServices, send: Send) -> None:
        self.services = services
        self._send = send
        self._lock = threading.Lock()
        self._terminals: dict[str, WebTerminal] = {}

    def get(self, conversation_id: str) -> WebTerminal:
        """The conversation's terminal (raises ConversationNotFound)."""
        with self._lock:
            terminal = self._terminals.get(conversation_id)
            if terminal is None:
                terminal = WebTerminal(self.services, conversation_id, send=self._send)
                self._terminals[conversation_id] = terminal
            return terminal

    def new(self) -> WebTerminal:
        return WebTerminal(self.services, None, send=self._send)

    def register(self, terminal: WebTerminal) -> None:
        assert terminal.conversation_id is not None
        with self._lock:
            self._terminals[terminal.conversation_id] = terminal

    def running(self) -> list[WebTerminal]:
        with self._lock:
            return [t for t in self._terminals.values() if t.running]
