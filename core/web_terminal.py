"""The web front of the core: events go to the conversation's room and into a replay log."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from core.cluster import Cluster, ClusterUnavailable, LocalCluster
from core.interrupted_calls import answer_interrupted_calls
from core.main_terminal import MainTerminal, TaskBusy
from core.services import AgentServices
from core.task import Task
from history.conversation import LEAF
from modules.tools.focus import focusable
from modules.workspace.file_tree import visible_changes
from protocol.budgets import BudgetOverride
from protocol.cluster import Joined
from protocol.events import Done, Error, Event, FileTree
from protocol.options import Approval, Mode
from protocol.records import AttachmentMeta, MessageRecord

Send = Callable[[Event], None]  # to the room of the event's conversation
Deliver = Callable[[Event], None]  # to one client
Announce = Callable[[dict[str, Any]], None]  # to every client: a list entry changed ({id, ...})
UNWRITTEN_SEQ_GAP = 1000  # far more events than a write batch of web/redis_cluster.py holds
INTERRUPTED = (
    "The server process running this task stopped before it ended; what it "
    "recorded is kept. Send a message to go on."
)


class WebTerminal(MainTerminal):
    """One per conversation; keeps every event of its running or last task for `join`."""

    def __init__(
        self,
        services: AgentServices,
        conversation_id: str | None,
        *,
        send: Send,
        announce: Announce | None = None,
        cluster: Cluster | None = None,
    ) -> None:
        self._send = send
        self._announce = announce
        self._cluster = cluster or LocalCluster()
        self._log: list[Event] = []
        self._task_message: str | None = None  # the user message of the running or last task
        super().__init__(services, conversation_id, sink=self._relay)
        self._replays_after = self.last_seq  # the log holds every event after this seq

    def _relay(self, event: Event) -> None:
        # Called with the core's lock held, so the log and the room see one order.
        if isinstance(event, FileTree):
            event.changes = visible_changes(self.services.workspace.root, event.changes)
        self._log.append(event)
        self._cluster.record(event)
        ended = isinstance(event, Done) and event.depth is None
        if ended and self.conversation_id is not None and self._task_message is not None:
            # Its end is stored (_keep_end): free the conversation before anyone hears of it.
            self._cluster.end(self.conversation_id, self._task_message)
        self._send(event)
        if ended and self._announce is not None and self.conversation is not None:
            conversation = self.conversation
            self._announce(
                {"id": conversation.id, "running": False, "title": conversation.meta.get("title")}
            )

    def begin_task(
        self,
        text: str,
        *,
        parent_id: str | None = LEAF,
        skill: str | None = None,
        attachments: list[AttachmentMeta] | None = None,
        budget_override: BudgetOverride | None = None,
    ) -> Task:
        with self.timeline.lock:
            created = self.conversation is None
            task = super().begin_task(
                text,
                parent_id=parent_id,
                skill=skill,
                attachments=attachments,
                budget_override=budget_override,
            )
            self._log = []
            self._replays_after = self.last_seq
            self._task_message = task.user_record["id"]
            if created:  # nobody else knows it yet: the lease is free (the heartbeat takes
                with contextlib.suppress(ClusterUnavailable):  # it once Redis answers again)
                    self._cluster.claim(task.conversation.id)
            self._cluster.begin(task.conversation.id, self._task_message, self._replays_after)
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
        focus: list[str] | None = None,
        attachments: list[AttachmentMeta] | None = None,
        on_begun: Callable[[MessageRecord], None] | None = None,
        budget_override: BudgetOverride | None = None,
    ) -> MessageRecord:
        """Begin a task and run it in the background; raises TaskBusy, KeyError or
        BudgetRefused (`budget_override`: a higher limit for this task only).

        `parent_id` as in `begin_task`: LEAF (the current leaf), None (a new root) or an id.
        `focus`: the files a new conversation starts with in focus (workspace paths).

        `on_begun(user_record)` runs after the conversation exists and before the first event,
        so the sender can join the room without missing anything.
        """
        with self.timeline.lock:
            if self.running:
                raise TaskBusy("a task is already running in this conversation")
            claimed = self._take()
            try:
                if agent is not None:
                    self.services.agents.get(agent)  # KeyError names the agents there are
                    self.agent = agent
                if focus is not None and self.conversation is None:
                    workspace = self.services.workspace
                    self.focus.reset([focusable(workspace, path) for path in focus])
                self.mode = mode or self.mode
                self.approval = approval or self.approval
                task = self.begin_task(
                    text,
                    parent_id=parent_id,
                    skill=skill,
                    attachments=attachments,
                    budget_override=budget_override,
                )
            except BaseException:
                if claimed is not None:
                    self._cluster.release(claimed)
                raise
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
        run_in_background(self._run_then_release, task)
        return task.user_record

    def _take(self) -> str | None:
        """Claim the conversation's task lease (cluster-wide) and, when other processes write
        the data dir, its history as stored now; returns the id claimed (None: a new one)."""
        cid = self.conversation_id
        if cid is None:
            return None
        self._claim(cid)
        if self._cluster.shared:
            try:
                self.services.store.reload(cid)
                self.open_conversation(cid)
                self.timeline.skip_to(self._cluster.last_seq(cid))
                orphan = self._cluster.orphan(cid)
                if orphan is not None:
                    self.interrupt(orphan)  # its `done` gives the lease back: take it again
                    self._claim(cid)
            except BaseException:
                self._cluster.release(cid)
                raise
        return cid

    def _claim(self, cid: str) -> None:
        if not self._cluster.claim(cid):
            raise TaskBusy(
                "a task is already running in this conversation (in another server process)"
            )

    def _run_then_release(self, task: Task) -> None:
        try:
            self.run_task(task)
        finally:  # a no-op once its `done` has ended it
            self._cluster.end(task.conversation.id, task.user_record["id"])

    def interrupt(self, message_id: str) -> None:
        """End a task a stopped process left running: an `interrupted` result for each call
        it left without one, `error` and `done` ("interrupted") to every client, and the end
        kept in the history like any task's (its lease released before the `done`)."""
        with self.timeline.lock:
            conversation = self.conversation
            if conversation is None or self.running:
                return
            # The stopped process's last batch of events may never have reached the stream
            # while its clients saw them: go past any seq they can hold, or they drop ours.
            seen = max(self.timeline.seq, self._cluster.last_seq(conversation.id))
            self.timeline.skip_to(seen + UNWRITTEN_SEQ_GAP)
            self._log, self._replays_after = [], self.timeline.seq
            self._task_message = message_id
            answer_interrupted_calls(conversation, self.timeline.record)
            self.timeline.report(Error("interrupted", INTERRUPTED))
            self.end_task(message_id, Done("interrupted"))

    def record_interrupted_calls(self) -> None:
        """Record an `interrupted` result for each call at the leaf a stopped process left
        without one; the caller knows no process runs a task here (it holds the lease)."""
        with self.timeline.lock:
            if self.conversation is not None and not self.running:
                answer_interrupted_calls(self.conversation, self.timeline.record)

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
