"""One conversation's agent: its tasks begun, run and ended, its history, focus and approvals.

What a task does is core/agent_loop.py's; this class holds what outlives a task (the
conversation, its timeline of events and records, the focus files, the approval gate, the
context window) and is what the fronts call. A front subclasses it to give it the sink of its
events and to run its tasks its own way: cli/terminal.py prints them and asks approvals at
the terminal while a worker thread runs the task; core/web_terminal.py's WebTerminal sends
them to the conversation's room and a replay log, runs tasks in the background, and tells
the web front's TaskHooks each step of a task (where the cluster holds it). A task's message
is recorded by core/user_message.py, its budgets and cost are core/task_budgets.py's, its end
core/task_end.py's.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from typing import Any, TypedDict, Unpack, get_args

from core.agent_loop import AgentLoop
from core.approval import ApprovalGate
from core.condensation import Outcome
from core.context_window import ContextWindow
from core.services import AgentServices
from core.spend import Ledger, TaskSpend
from core.status import StatusLine
from core.task import StoredTranscript, Task
from core.task_budgets import budget_guard, task_cost, task_limits
from core.task_end import keep_task_end, run_to_end
from core.timeline import EventSink, Timeline
from core.tool_step import ToolStep
from core.user_message import record_user_message, user_message_event
from history.conversation import LEAF, Conversation, MessageNotFound
from modules.sandbox.factory import sessions_of
from modules.sandbox.session.records import has_processes
from modules.tools.focus import FocusFiles, focusable
from modules.undo.restore import UndoResult
from protocol.budgets import BudgetOverride
from protocol.event_values import ContextUsage
from protocol.events import Done, DoneReason, Event, TaskState
from protocol.options import Approval, Mode
from protocol.records import AttachmentMeta, ConversationState, EndedProcessMeta, MessageRecord
from utils.cancel import CancelReason, CancelToken
from utils.errors import Busy, Invalid, NotConfigured
from utils.logger import log_context
from utils.settings import Settings
from utils.text import shown

log = logging.getLogger(__name__)


class MessageOptions(TypedDict, total=False):
    """How a user message is recorded (`MainTerminal.begin_task`), each key optional."""

    parent_id: str | None  # None: a new root; absent: under the leaf (LEAF)
    skill: str | None  # a skill whose instructions go to the model with this message
    attachments: list[AttachmentMeta] | None  # AttachmentStore.attach, as dicts
    budget_override: BudgetOverride | None  # a higher limit for this task only


class TaskBusy(Busy):
    """A task is already running in this conversation."""


class NothingToCondense(Invalid):
    """The history has no older turn a summary could replace yet."""


class MainTerminal:
    """Runs tasks in one conversation and reports every step to the sink it is given."""

    def __init__(
        self,
        services: AgentServices,
        conversation_id: str | None = None,
        *,
        sink: EventSink,
        mode: Mode | None = None,
        approval: Approval | None = None,
        agent: str | None = None,
    ) -> None:
        self.services = services
        self.spend_ledger = Ledger(self.settings.data_dir)
        self.mode: Mode = mode or self.settings.mode
        self.approval: Approval = approval or self.settings.approval
        self.agent = agent or self.settings.default_agent
        self.timeline = Timeline(sink)
        self.focus = FocusFiles()
        self.gate = ApprovalGate()
        self.window = ContextWindow(services, self.timeline, self.focus)
        self.status = StatusLine(lambda: self.window.usage)
        tool_step = ToolStep(services, self.gate, self.status, self.focus)
        self.loop = AgentLoop(services, self.window, tool_step, self.status)
        self.task: Task | None = None
        self._compacting: CancelToken | None = None  # a condensation outside any task
        if conversation_id is not None:
            self.open_conversation(conversation_id)

    # --- what fronts call ---------------------------------------------------------------

    @property
    def settings(self) -> Settings:
        """The settings now (the user may change theirs while the program runs)."""
        return self.services.settings

    @property
    def conversation(self) -> Conversation | None:
        return self.timeline.conversation

    @property
    def conversation_id(self) -> str | None:
        return self.conversation.id if self.conversation is not None else None

    @property
    def running(self) -> bool:
        return self.task is not None

    def wait_done_sent(self) -> None:
        """Returns once the last task's `done` went out: it is sent holding the timeline's
        lock, after `running` turned False."""
        with self.timeline.lock:
            return

    @property
    def last_seq(self) -> int:
        return self.timeline.seq

    @property
    def state(self) -> TaskState:
        return self.status.state

    @property
    def iteration(self) -> int:
        """The model call the running or last task's top agent is at."""
        return self.status.iteration

    @property
    def context_usage(self) -> ContextUsage:
        """How full the window was at the top agent's newest call (or after a condensation)."""
        return self.window.usage

    def open_conversation(self, conversation_id: str) -> None:
        """Switch to a stored conversation (raises ConversationNotFound)."""
        conversation = self.services.store.get(conversation_id)
        stored = conversation.meta.get("meta", {})
        records = conversation.records
        newest = int(records[-1].get("seq") or 0) if records else 0
        self.agent = stored.get("agent") or self.agent
        if stored.get("mode") in get_args(Mode):  # what its last task ran with
            self.mode = stored["mode"]
        if stored.get("approval") in get_args(Approval):
            self.approval = stored["approval"]
        self.focus.reset(list(stored.get("focus", [])))
        # A crashed task saved no end: its records may be newer than the last seq stored.
        self.timeline.open(conversation, max(int(stored.get("last_seq", 0)), newest))

    def new_conversation(self) -> None:
        """Start afresh; the conversation is created by the next task."""
        self.focus.reset([])
        self.timeline.open(None, 0)

    def set_focus(self, path: str, focused: bool) -> list[str]:
        """Focus or unfocus a file between tasks; returns the focus list (raises ToolError,
        or TaskBusy: the running task's tools may change the focus too)."""
        with self.timeline.lock:
            if self.running:
                raise TaskBusy("a task is running in this conversation; change focus when it ends")
            workspace = self.services.workspace
            if focused:
                self.focus.add(focusable(workspace, path))
            else:
                self.focus.remove(workspace.relative(workspace.resolve(path)))
            self.save_focus()
            return self.focus.paths()

    def save_focus(self) -> None:
        """Persist the focus files with the conversation, when there is one yet."""
        if self.conversation is not None:
            self.conversation.update_meta(focus=self.focus.paths())

    def snapshot(self) -> tuple[list[MessageRecord], int]:
        """The records and the seq they cover: render them, then apply only events after it.

        While a task runs that is the seq of its newest record, so what streams after it (an
        answer being written, a call waiting for approval) comes as events; otherwise the last.
        """
        with self.timeline.lock:
            records = self.conversation.records if self.conversation else []
            if self.task is None or not records:
                return records, self.timeline.seq
            return records, int(records[-1].get("seq") or 0)

    def cancel(self, reason: CancelReason = "user") -> bool:
        """Stop the running task (or condensation) at once; False when nothing runs. A task
        stopped for a `shutdown` ends as `interrupted`, not `cancelled`."""
        running = self.task.cancel if self.task is not None else self._compacting
        if running is None:
            return False
        running.cancel(reason)
        return True

    def approve(self, call_id: str, approved: bool, *, always: bool = False) -> bool:
        """Answer a call waiting for approval; False when no such call waits."""
        return self.gate.answer(call_id, approved, always=always)

    def undo(
        self, message_id: str | None = None, overwrite: bool | Collection[str] = False
    ) -> UndoResult:
        """Put back what a task changed in the workspace (default: the last), but not the
        paths changed since unless `overwrite` names them (True: all); raises TaskBusy."""
        with self.timeline.lock:
            if self.task is not None:
                raise TaskBusy("a task is running in this conversation; undo when it ends")
            return self.services.journal.undo(self.conversation_id or "", message_id, overwrite)

    def begin_task(self, text: str, **options: Unpack[MessageOptions]) -> Task:
        """Record the user message as `options` say (MessageOptions) and claim the
        conversation for its task; raises NotConfigured, TaskBusy, DiskFull, NotFound for an
        unknown parent, agent or skill, or BudgetRefused for an override that raises no
        limit. A message it raises for is not kept."""
        parent_id = options.get("parent_id", LEAF)
        skill = options.get("skill")
        attachments = options.get("attachments")
        budget_override = options.get("budget_override")
        with self.timeline.lock:
            self._check_free()
            agent = self.services.agents.get(self.agent)
            limits = task_limits(self.settings, agent, budget_override)
            if skill is not None:
                self.services.skills.require(skill)
            known = self.conversation.index if self.conversation else {}
            if parent_id not in (LEAF, None) and parent_id not in known:
                raise MessageNotFound(f"no message {shown(parent_id)} in this conversation")
            meta: dict[str, Any] = {"skill": skill} if skill else {}
            if attachments:
                meta["attachments"] = attachments
            ended = self._ended_with_the_server()
            if ended:
                meta["processes_ended"] = ended
            chosen: ConversationState = {
                "agent": agent.name,
                "mode": self.mode,
                "approval": self.approval,
                "focus": self.focus.paths(),
            }
            record = record_user_message(
                self.services, self.timeline, chosen, text, parent_id, meta
            )
            conversation = self.conversation
            assert conversation is not None
            journal = self.services.journal.task(conversation.id, record["id"])
            transcript = StoredTranscript(self.timeline)
            spend = TaskSpend(self.spend_ledger, conversation.id)
            self.task = Task(
                conversation,
                record,
                journal,
                self.mode,
                self.approval,
                agent,
                transcript,
                self.timeline.report,
                self.services.setup,
                spend=spend,
                budgets=budget_guard(limits, conversation, spend.totals, self.spend_ledger),
            )
            self.status.iteration = 0
            return self.task

    def _ended_with_the_server(self) -> list[EndedProcessMeta]:
        """The conversation's background processes that ended when a server stopped and the
        model is yet to be told of (told with this message, once)."""
        if self.conversation is None or not has_processes(
            self.services.settings.data_dir, self.conversation.id
        ):
            return []  # and the sandbox is not built for nothing (`cli -p` answering)
        sessions = sessions_of(self.services.runner)
        if sessions is None:
            return []
        ended = sessions.take_untold(self.conversation.id)
        return [{"id": record.id, "command": record.command} for record in ended]

    def run_task(self, task: Task) -> DoneReason:
        """Run a task begun with `begin_task` to its end, which is always a `done` event."""
        provider = task.setup.provider
        fields = {"trace_id": task.trace_id, "conversation_id": task.conversation.id}
        with log_context(**fields, provider=provider.name, model=provider.model):
            prompt, message_id = task.user_record["content"], task.user_record["id"]
            log.info("task started", extra={"fields": {"prompt": prompt, "message_id": message_id}})
            reason = run_to_end(self._announce_and_run, task, self.settings.data_dir)
            log.info("task ended", extra={"fields": {"reason": reason, **vars(task.usage)}})
        task.journal.finish()  # what it left each path as, before anyone can undo it
        with self.timeline.lock:  # no new task can start before this one's `done` went out
            self.task = None
            self.status.set("idle", task, force=True)
            done = Done(reason, task.usage, budget=task.budget_reached)
            if task.spend is not None:
                done.cost = task_cost(task.spend.totals, provider.model, task.setup.settings)
            done.agent = task.agent.name
            self.end_task(task.user_record["id"], done)
        return reason

    def _announce_and_run(self, task: Task) -> DoneReason:
        """Tell every view the message the task starts with (its first event), then run it."""
        task.report(user_message_event(task.user_record, task.mode))
        return self.loop.run(task)

    def end_task(self, message_id: str, done: Done) -> None:
        """Send a task's `done`, its end kept with the conversation first: whoever sees it
        may start the next task."""

        def keep(event: Event) -> None:
            conversation = self.conversation
            if conversation is not None:
                keep_task_end(conversation, message_id, done, self.focus.paths(), event.seq or 0)

        done.agent = done.agent or self.agent
        self.timeline.report(done, before_send=keep)

    def _check_free(self) -> None:
        problem = self.services.provider.problem
        if problem is not None:
            raise NotConfigured(problem)
        if self.task is not None:
            raise TaskBusy("a task is already running in this conversation")
        if self._compacting is not None:
            raise TaskBusy("the conversation's context is being condensed; send it when that ends")

    # --- condensing the context outside a task (core/context_window.py) --------------

    def begin_compaction(self, instructions: str | None = None) -> CancelToken | None:
        """Ask for the history to be condensed: now (returns the token `run_compaction`
        takes) or, while a task runs, before its next model call (returns None).

        Raises NotConfigured, NothingToCondense, or TaskBusy while a condensation runs.
        """
        with self.timeline.lock:
            problem = self.services.provider.problem
            if problem is not None:
                raise NotConfigured(problem)
            if self._compacting is not None:
                raise TaskBusy("the context is already being condensed")
            if self.task is not None:
                self.window.request(instructions)
                return None
            if not self.window.condensable(self.conversation, self.agent):
                raise NothingToCondense(
                    "Nothing to condense yet: the first message and the newest turn are always "
                    "kept as they are, and nothing else comes before the newest turn."
                )
            self._compacting = CancelToken()
            return self._compacting

    def run_compaction(self, cancel: CancelToken, instructions: str | None = None) -> Outcome:
        """Condense the history outside any task; its events go out as a task's do."""
        conversation = self.conversation
        assert conversation is not None
        agent = self.services.agents.get(self.agent)
        tools = self.loop.tools_for(agent, self.approval, None).schemas()
        try:
            return self.window.condense_now(conversation, self.agent, tools, cancel, instructions)
        finally:
            with self.timeline.lock:
                self._compacting = None
            conversation.update_meta(last_seq=self.timeline.seq)
