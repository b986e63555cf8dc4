"""The web front of the core: events go to the conversation's room and into a replay log."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from core.main_terminal import MainTerminal, TaskBusy
from core.services import AgentServices
from utils.conversation_store import LEAF
from utils.settings import Approval, Mode

Send = Callable[[str, dict[str, Any], str], None]  # (event, payload, room)
Deliver = Callable[[str, dict[str, Any]], None]  # (event, payload) to one client


class WebTerminal(MainTerminal):
    """One per conversation; keeps the events of its running or last task for `join`."""

    def __init__(self, services: AgentServices, conversation_id: str | None, *, send: Send) -> None:
        super().__init__(services, conversation_id)
        self._send = send
        self._log: list[tuple[str, dict[str, Any]]] = []

    def emit(self, event: str, payload: dict[str, Any]) -> None:
        # Called by the core with its emit lock held, so the log and the room see one order.
        self._log.append((event, payload))
        self._send(event, payload, payload["conversation_id"])

    def begin_task(self, text: str, *, parent_id: str | None = LEAF) -> dict[str, Any]:
        record = super().begin_task(text, parent_id=parent_id)
        with self._emit_lock:
            self._log = []
        return record

    def start(
        self,
        text: str,
        *,
        parent_id: str | None,
        mode: Mode | None,
        approval: Approval | None,
        run_in_background: Callable[..., Any],
        on_begun: Callable[[dict[str, Any]], None] | None = None,
    ) -> dict[str, Any]:
        """Begin a task and run it in the background; raises TaskBusy or KeyError.

        `parent_id` as in `begin_task`: LEAF (the current leaf), None (a new root) or an id.

        `on_begun(user_record)` runs after the conversation exists and before the first event,
        so the sender can join the room without missing anything.
        """
        if self.running:
            raise TaskBusy("a task is already running in this conversation")
        record = self.begin_task(text, parent_id=parent_id)
        self.mode = mode or self.mode
        self.approval = approval or self.approval
        if on_begun is not None:
            on_begun(record)
        run_in_background(self.run_task, record)
        return record

    def replay(
        self, after_seq: int, deliver: Deliver, *, subscribe: Callable[[], None] | None = None
    ) -> None:
        """Hand every logged event with seq > after_seq to `deliver`, with no live event between.

        `subscribe` (joining the room) runs under the same lock, so every later event reaches
        the client live and every earlier one through `deliver`: no gap and no duplicate.
        """
        with self._emit_lock:
            if subscribe is not None:
                subscribe()
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
        """A terminal for a conversation the next task will create; `register` it once begun."""
        return WebTerminal(self.services, None, send=self._send)

    def register(self, terminal: WebTerminal) -> None:
        """Make a begun terminal findable by its conversation id."""
        assert terminal.conversation_id is not None
        with self._lock:
            self._terminals[terminal.conversation_id] = terminal

    def running(self) -> list[WebTerminal]:
        """The terminals whose task is running now."""
        with self._lock:
            return [t for t in self._terminals.values() if t.running]
