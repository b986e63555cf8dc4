"""What a conversation's terminal is doing, reported to its clients when it changes."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from protocol.event_values import ContextUsage
from protocol.events import Status, TaskState

if TYPE_CHECKING:
    from core.task import Task


class StatusLine:
    """The state (idle, thinking, streaming, tool), the top agent's model call number, and
    how full the context window was at its newest call."""

    def __init__(self, usage: Callable[[], ContextUsage]) -> None:
        self.state: TaskState = "idle"
        self.iteration = 0  # of the running or last task's top agent
        self._usage = usage

    def set(self, state: TaskState, task: Task, *, force: bool = False) -> None:
        """Report `state` through the task, unless it is the state already."""
        if state == self.state and not force:
            return
        self.state = state
        spent = task.spend.totals.to_wire() if task.spend is not None else None
        task.report(Status(state, self.iteration, self._usage(), spent))
