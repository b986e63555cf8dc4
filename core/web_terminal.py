"""The web front of the core: events go to the conversation's room and into a replay log.

Where the web front holds a task's conversation beyond this process (web/cluster/: leases,
replay streams, the tasks a stopped process left) it does through TaskHooks, which this
module calls at each step of a task and knows nothing more of.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, Protocol, Unpack, cast

from core.main_terminal import MainTerminal, MessageOptions, TaskBusy
from core.services import AgentServices
from core.task import Task
from modules.tools.focus import focusable
from modules.workspace.file_tree import visible_changes
from protocol.cluster import Joined
from protocol.events import Done, Event, FileTree, Process
from protocol.options import Approval, Mode
from protocol.records import MessageRecord

Send = Callable[[Event], None]  # to the room of the event's conversation
Deliver = Callable[[Event], None]  # to one client
Announce = Callable[[dict[str, Any]], None]  # to every client: a list entry changed ({id, ...})
LOGGED_OUTPUT_CHARS = 1 << 20  # process output kept for `join` per log; the rest is only live


class SendOptions(MessageOptions, total=False):
    """A front's send (`WebTerminal.start`): the message's options, and what the conversation
    runs with from this task on."""

    mode: Mode | None
    approval: Approval | None
    agent: str | None  # checked: NotFound names the agents there are
    focus: list[str] | None  # the files a new conversation starts with in focus


class TaskHooks(Protocol):
    """What the web front does at each step of a terminal's task, called with the terminal's
    timeline lock held (but `ended` after the run), so it sees the one order the room sees."""

    def hold(self, terminal: WebTerminal) -> AbstractContextManager[object]:
        """Hold the terminal's conversation for the task begun inside the block, or raise
        TaskBusy; let go of it when the block raises."""
        ...

    def begun(
        self, conversation_id: str, message_id: str, replays_after: int, *, created: bool
    ) -> None:
        """A task began here (`created`: with its conversation), logged after `replays_after`."""
        ...

    def relayed(self, event: Event) -> None:
        """An event is logged and about to go to the room."""
        ...

    def ended(self, conversation_id: str, message_id: str) -> None:
        """The task of user message `message_id` ended, its end stored, and nobody has heard
        of it yet; called again once its run returns (then without the lock)."""
        ...


class WebTerminal(MainTerminal):
    """One per conversation; keeps every event of its running or last task for `join`."""

    def __init__(
        self,
        services: AgentServices,
        conversation_id: str | None,
        *,
        send: Send,
        hooks: TaskHooks,
        announce: Announce | None = None,
    ) -> None:
        self._send = send
        self._hooks = hooks
        self._announce = announce
        self._log: list[Event] = []
        self._logged_output = 0  # characters of process output in the log
        self._task_message: str | None = None  # the user message of the running or last task
        super().__init__(services, conversation_id, sink=self._relay)
        self._replays_after = self.last_seq  # the log holds every event after this seq

    def _relay(self, event: Event) -> None:
        # Called with the core's lock held, so the log and the room see one order.
        if isinstance(event, FileTree):
            event.changes = visible_changes(self.services.workspace.root, event.changes)
        if self._logs(event):
            self._log.append(event)
        self._hooks.relayed(event)
        ended = isinstance(event, Done) and event.depth is None
        if ended and self.conversation_id is not None and self._task_message is not None:
            # Its end is stored (end_task): free the conversation before anyone hears of it.
            self._hooks.ended(self.conversation_id, self._task_message)
        self._send(event)
        if ended and self._announce is not None and self.conversation is not None:
            conversation = self.conversation
            self._announce(
                {"id": conversation.id, "running": False, "title": conversation.meta.get("title")}
            )

    def _logs(self, event: Event) -> bool:
        """Whether `join` replays it: every event but process output past LOGGED_OUTPUT_CHARS
        (a client that missed it reads it with `process_output` from the offset it has)."""
        if not isinstance(event, Process) or event.delta is None:
            return True
        self._logged_output += len(event.delta)
        return self._logged_output <= LOGGED_OUTPUT_CHARS

    def report_process(self, event: Process) -> None:
        """A background process of this conversation changed (in a task or between tasks)."""
        with self.timeline.lock:
            if self.conversation is not None:
                self.timeline.report(event, outside_task=not self.running)

    def begin_task(self, text: str, **options: Unpack[MessageOptions]) -> Task:
        with self.timeline.lock:
            created = self.conversation is None
            task = super().begin_task(text, **options)
            message_id = task.user_record["id"]
            self.log_task(message_id)
            self._hooks.begun(
                task.conversation.id, message_id, self._replays_after, created=created
            )
            return task

    def log_task(self, message_id: str) -> None:
        """Log what follows as the events of the task of user message `message_id` (begun
        here, or left by a stopped process and ended here): the log starts after the last seq."""
        with self.timeline.lock:
            self._log, self._replays_after = [], self.timeline.seq
            self._logged_output = 0
            self._task_message = message_id

    def start(
        self,
        text: str,
        *,
        run_in_background: Callable[..., Any],
        on_begun: Callable[[MessageRecord], None] | None = None,
        **options: Unpack[SendOptions],
    ) -> MessageRecord:
        """Begin a task and run it in the background; raises TaskBusy, NotFound, BudgetRefused
        or what the hooks' `hold` does.

        `on_begun(user_record)` runs after the conversation exists and before the first event,
        so the sender can join the room without missing anything.
        """
        agent, focus = options.pop("agent", None), options.pop("focus", None)
        mode, approval = options.pop("mode", None), options.pop("approval", None)
        message = cast(MessageOptions, options)  # what is left is the message's own
        with self.timeline.lock:
            if self.running:
                raise TaskBusy("a task is already running in this conversation")
            with self._hooks.hold(self):
                if agent is not None:
                    self.services.agents.get(agent)  # NotFound names the agents there are
                    self.agent = agent
                if focus is not None and self.conversation is None:
                    workspace = self.services.workspace
                    self.focus.reset([focusable(workspace, path) for path in focus])
                self.mode = mode or self.mode
                self.approval = approval or self.approval
                task = self.begin_task(text, **message)
        if on_begun is not None:
            on_begun(task.user_record)
        if self._announce is not None:
            self._announce(
                {
                    "id": task.conversation.id,
                    "running": True,
                    "title": task.conversation.meta.get("title"),
                }
            )
        run_in_background(self._run_then_end, task)
        return task.user_record

    def _run_then_end(self, task: Task) -> None:
        try:
            self.run_task(task)
        finally:  # a no-op once its `done` has ended it
            self._hooks.ended(task.conversation.id, task.user_record["id"])

    def task_status(self) -> dict[str, Any] | None:
        """Where the running task is (None when none runs here)."""
        if not self.running:
            return None
        state = "thinking" if self.state == "idle" else self.state  # just begun
        status: dict[str, Any] = {
            "state": state,
            "iteration": self.iteration,
            "context": vars(self.context_usage),
        }
        task = self.task
        if task is not None and task.spend is not None:
            status["usage"] = task.spend.totals.to_wire()
        return status

    def replay(self, after_seq: int, deliver: Deliver, *, subscribe: Callable[[], None]) -> Joined:
        """Hand every logged event with seq > after_seq to `deliver`, with no live event between.

        `subscribe` (joining the room) runs under the same lock, so every later event reaches
        the client live and every earlier one through `deliver`: no gap and no duplicate.
        Returns what the `join` ack reports: whether a task runs, the last seq, and the seq
        after which the log is whole (an older `after_seq` must reload the history first).
        """
        with self.timeline.lock:
            subscribe()
            for event in self._log:
                if event.seq is not None and event.seq > after_seq:
                    deliver(event)
            return Joined(self.running, self.last_seq, self._replays_after)
