"""The web front of the core: events go to the conversation's room and into a replay log."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from core.events import Event
from core.main_terminal import MainTerminal, TaskBusy
from core.services import AgentServices
from core.task import Task
from utils.conversation_store import LEAF
from utils.settings import Approval, Mode

Send = Callable[[Event], None]  # to the room of the event's conversation
Deliver = Callable[[Event], None]  # to one client


class WebTerminal(MainTerminal):
    """One per conversation; keeps every event of its running or last task for `join`."""

    def __init__(self, services: AgentServices, conversation_id: str | None, *, send: Send) -> None:
        self._send = send
        self._log: list[Event] = []
        super().__init__(services, conversation_id, sink=self._relay)
        self._replays_after = self.last_seq  # the log holds every event after this seq

    def _relay(self, event: Event) -> None:
        # Called with the core's lock held, so the log and the room see one order.
        self._log.append(event)
        self._send(event)

    def begin_task(
        self, text: str, *, parent_id: str | None = LEAF, skill: str | None = None
    ) -> Task:
        with self._lock:
            task = super().begin_task(text, parent_id=parent_id, skill=skill)
            self._log = []
            self._replays_after = self.last_seq
            return task

    def start(
        self,
        text: str,
        *,
        parent_id: str | None,
        mode: Mode | None,
        approval: Approval | None,
        run_in_background: Callable[..., Any],
        agent: str | None = None,
        skill: str | None = None,
        on_begun: Callable[[dict[str, Any]], None] | None = None,
    ) -> dict[str, Any]:
        """Begin a task and run it in the background; raises TaskBusy or KeyError.

        `parent_id` as in `begin_task`: LEAF (the current leaf), None (a new root) or an id.

        `on_begun(user_record)` runs after the conversation exists and before the first event,
        so the sender can join the room without missing anything.
        """
        with self._lock:
            if self.running:
                raise TaskBusy("a task is already running in this conversation")
            if agent is not None:
                self.services.agents.get(agent)  # KeyError names the agents there are
                self.agent = agent
            self.mode = mode or self.mode
            self.approval = approval or self.approval
            task = self.begin_task(text, parent_id=parent_id, skill=skill)
        if on_begun is not None:
            on_begun(task.user_record)
        run_in_background(self.run_task, task)
        return task.user_record

    def replay(
        self, after_seq: int, deliver: Deliver, *, subscribe: Callable[[], None]
    ) -> dict[str, Any]:
        """Hand every logged event with seq > after_seq to `deliver`, with no live event between.

        `subscribe` (joining the room) runs under the same lock, so every later event reaches
        the client live and every earlier one through `deliver`: no gap and no duplicate.
        Returns what the `join` ack reports: whether a task runs, the last seq, and the seq
        after which the log is whole (an older `after_seq` must reload the history first).
        """
        with self._lock:
            subscribe()
            for event in self._log:
                if event.seq is not None and event.seq > after_seq:
                    deliver(event)
            return {
                "running": self.running,
                "last_seq": self.last_seq,
                "replays_after": self._replays_after,
            }


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
