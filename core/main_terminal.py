"""The agent loop for one conversation: build messages, stream the model, run tools, persist."""

from __future__ import annotations

import logging
import threading
from collections.abc import Collection
from typing import Any, get_args

from core.agent_specs import AgentSpec
from core.approval import ApprovalGate
from core.condensation import Outcome
from core.context_window import ContextWindow
from core.events import ContextUsage, Done, DoneReason, Error, Event, EventSink, Status, TaskState
from core.interrupted_calls import answer_interrupted_calls
from core.model_call import stream_reply
from core.modes import delegate, delegation_schema, run_agent
from core.services import AgentServices
from core.task import MAX_DEPTH, StoredTranscript, Task
from core.tool_step import ToolStep
from history.conversation import LEAF, Conversation
from history.titles import title_from
from model.completion import Completion
from model.errors import ApiError
from model.tool_calls import ToolCall
from modules.tools.focus import FocusFiles
from modules.undo.restore import UndoResult
from utils.cancel import CancelToken, TaskCancelled
from utils.logger import log_context
from utils.settings import Approval, Mode
from utils.text import shown

log = logging.getLogger(__name__)


class TaskBusy(Exception):
    """A task is already running in this conversation."""


class NothingToCondense(Exception):
    """The history has no older turn a summary could replace yet."""


class MainTerminal:
    """Runs tasks in one conversation and reports every step to the sink it is given.

    Every event gets the conversation's next `seq`, and every history record the `seq` of the
    last event before it, so a history snapshot and the events after its seq never overlap.
    """

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
        self.settings = services.settings
        self.sink = sink
        self.mode: Mode = mode or self.settings.mode
        self.approval: Approval = approval or self.settings.approval
        self.agent = agent or self.settings.default_agent
        self.gate = ApprovalGate()
        self.tool_step = ToolStep(
            services,
            self.gate,
            set_state=self._set_state,
            focus=lambda: self.focus,
            delegate=self._delegate,
        )
        self.state: TaskState = "idle"
        self.focus = FocusFiles()
        self.task: Task | None = None
        self.iteration = 0  # of the running or last task
        self._conversation: Conversation | None = None
        self._seq = 0
        self._lock = threading.RLock()  # orders events, records and the task's start and end
        self._compacting: CancelToken | None = None  # a condensation outside any task
        self.window = ContextWindow(
            services,
            self._lock,
            report=self._report,
            record=self._record,
            focus=lambda: self.focus,
            schemas=self._agent_schemas,
        )
        if conversation_id is not None:
            self.open_conversation(conversation_id)

    # --- what fronts call ---------------------------------------------------------------

    @property
    def conversation_id(self) -> str | None:
        return self._conversation.id if self._conversation else None

    @property
    def conversation(self) -> Conversation | None:
        return self._conversation

    @property
    def running(self) -> bool:
        return self.task is not None

    @property
    def last_seq(self) -> int:
        return self._seq

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
        self._conversation = conversation
        self.agent = stored.get("agent") or self.agent
        if stored.get("mode") in get_args(Mode):  # what its last task ran with
            self.mode = stored["mode"]
        if stored.get("approval") in get_args(Approval):
            self.approval = stored["approval"]
        self.focus = FocusFiles(list(stored.get("focus", [])))
        self._seq = max(int(stored.get("last_seq", 0)), newest)  # a crashed task saved no end

    def new_conversation(self) -> None:
        """Start afresh; the conversation is created by the next task."""
        self._conversation = None
        self.focus = FocusFiles()
        self._seq = 0

    def save_focus(self) -> None:
        """Persist the focus files with the conversation, when there is one yet."""
        if self._conversation is not None:
            self._conversation.update_meta(focus=self.focus.paths())

    def snapshot(self) -> tuple[list[dict[str, Any]], int]:
        """The records and the seq they cover: render them, then apply only events after it.

        While a task runs that is the seq of its newest record, so what streams after it (an
        answer being written, a call waiting for approval) comes as events; otherwise the last.
        """
        with self._lock:
            records = self._conversation.records if self._conversation else []
            if self.task is None or not records:
                return records, self._seq
            return records, int(records[-1].get("seq") or 0)

    def cancel(self) -> bool:
        """Stop the running task (or condensation) at once; False when nothing runs."""
        running = self.task.cancel if self.task is not None else self._compacting
        if running is None:
            return False
        running.cancel()
        return True

    def approve(self, call_id: str, approved: bool, *, always: bool = False) -> bool:
        """Answer a call waiting for approval; False when no such call waits."""
        return self.gate.answer(call_id, approved, always=always)

    def undo(
        self, message_id: str | None = None, overwrite: bool | Collection[str] = False
    ) -> UndoResult:
        """Put back what a task changed in the workspace (default: the last), but not the
        paths changed since unless `overwrite` names them (True: all); raises TaskBusy."""
        with self._lock:
            if self.task is not None:
                raise TaskBusy("a task is running in this conversation; undo when it ends")
            cid = self.conversation_id or ""
            return self.services.journal.undo(cid, message_id, overwrite)

    def handle_task(
        self, text: str, *, parent_id: str | None = LEAF, skill: str | None = None
    ) -> DoneReason:
        """Record the user's message and run the task to its end."""
        return self.run_task(self.begin_task(text, parent_id=parent_id, skill=skill))

    def begin_task(
        self,
        text: str,
        *,
        parent_id: str | None = LEAF,
        skill: str | None = None,
        attachments: list[dict[str, Any]] | None = None,
    ) -> Task:
        """Record the user message under `parent_id` (None: a new root; default: the leaf).

        `skill` names a skill whose instructions go to the model with this message;
        `attachments` (AttachmentStore.attach, as dicts) the files that go with it. Claims
        the conversation for the task; raises TaskBusy, or KeyError for an unknown parent,
        agent or skill.
        """
        with self._lock:
            if self.task is not None:
                raise TaskBusy("a task is already running in this conversation")
            if self._compacting is not None:
                raise TaskBusy(
                    "the conversation's context is being condensed; send it when that ends"
                )
            agent = self.services.agents.get(self.agent)
            if skill is not None:
                self.services.skills.require(skill)
            chosen = {"agent": agent.name, "mode": self.mode, "approval": self.approval}
            if self._conversation is None:  # titled and set up in one write of meta.json
                self._conversation = self.services.store.create(
                    title=title_from(text) or None, meta=chosen
                )
            conversation = self._conversation
            if parent_id not in (LEAF, None) and parent_id not in conversation.index:
                raise KeyError(f"no message {shown(parent_id)} in this conversation")
            parent_id = answer_interrupted_calls(conversation, self._record, parent_id)
            meta = {"skill": skill} if skill else {}
            if attachments:
                meta["attachments"] = attachments
            record = self._record("user", text, parent_id=parent_id, meta=meta or None)
            stored = conversation.meta["meta"]
            if any(stored.get(key) != value for key, value in chosen.items()):
                conversation.update_meta(**chosen)
            journal = self.services.journal.task(conversation.id, record["id"])
            self.task = Task(
                conversation,
                record,
                journal,
                self.mode,
                self.approval,
                agent,
                StoredTranscript(lambda: self._conversation, self._record),
                self._report,
            )
            self.iteration = 0
            return self.task

    def run_task(self, task: Task) -> DoneReason:
        """Run the loop for a task begun with `begin_task`; always ends with a `done` event."""
        provider = self.services.provider
        fields = {
            "trace_id": task.trace_id,
            "conversation_id": task.conversation.id,
            "provider": provider.name,
            "model": provider.model,
        }
        with log_context(**fields):
            log.info(
                "task started",
                extra={
                    "fields": {
                        "prompt": task.user_record["content"],
                        "message_id": task.user_record["id"],
                    }
                },
            )
            reason = self._run_guarded(task)
            log.info("task ended", extra={"fields": {"reason": reason, **vars(task.usage)}})
        task.journal.finish()  # what it left each path as, before anyone can undo it
        self._finish(task, reason)
        return reason

    # --- the loop ---------------------------------------------------------------------

    def _run_guarded(self, task: Task) -> DoneReason:
        try:
            return run_agent(self, task)
        except TaskCancelled:
            return "cancelled"
        except ApiError as exc:
            task.report(Error(exc.code, str(exc)))
            return "error"
        except Exception as exc:
            log.exception("task crashed")
            task.report(Error("internal_error", f"{type(exc).__name__}: {exc}"))
            return "error"

    def react(self, task: Task, tools: list[dict[str, Any]], budget: int) -> DoneReason:
        """Call the model and run its tool calls until it answers without any, or `budget`."""
        for iteration in range(1, budget + 1):
            task.iteration = iteration
            if task.depth == 0:
                self.iteration = iteration
            task.cancel.raise_if_cancelled()
            completion = self.call_model(task, tools)
            if not completion.tool_calls:
                return "complete"
            self.run_tools(task, completion.tool_calls)
            if task.stop_after_tools:
                task.stop_after_tools = False
                return "complete"
        return "max_iterations"

    def run_tools(self, task: Task, calls: list[ToolCall]) -> None:
        """Run one turn's tool calls, each result recorded before the next starts."""
        self.tool_step.run(task, calls)

    def budget(self, task: Task) -> int:
        """How many model calls the task's agent may make."""
        return task.agent.max_iterations or self.settings.max_iterations

    def tool_schemas(self, task: Task) -> list[dict[str, Any]]:
        """The tools the task's agent is offered: its allow-list, the approval mode's limit,
        one `delegate_to_NAME` per agent it may hand work to, and the task's own."""
        schemas = self._agent_schemas(task.agent, task.approval, task.depth)
        return schemas + [schema for schema, _ in task.internal_tools.values()]

    def _agent_schemas(
        self, agent: AgentSpec, approval: Approval, depth: int
    ) -> list[dict[str, Any]]:
        registry = self.services.tools
        schemas = [
            s
            for s in registry.schemas(read_only=approval == "read-only")
            if agent.allows(s["function"]["name"])
        ]
        if depth < MAX_DEPTH:
            schemas += [delegation_schema(self.services.agents.get(name)) for name in agent.agents]
        return schemas

    def _delegate(self, task: Task, call_id: str, name: str, arguments: dict[str, Any]) -> Any:
        return delegate(self, task, call_id, self.services.agents.get(name), arguments)

    def _finish(self, task: Task, reason: DoneReason) -> None:
        with self._lock:  # no new task can start before this one's `done` went out
            self.task = None
            self._set_state("idle", task, force=True)
            task.report(Done(reason, task.usage))

    def _keep_end(self, done: Done) -> None:
        """Store a task's end before its `done` goes out: whoever sees it may start the next."""
        if self._conversation is not None:
            self._conversation.update_meta(focus=self.focus.paths(), last_seq=done.seq)

    # --- the model call ---------------------------------------------------------------

    def call_model(self, task: Task, tools: list[dict[str, Any]] | None) -> Completion:
        """One streamed model call on the task's transcript, recorded when it ends.

        `tools` None sends no `tools` parameter at all (a plain answer).
        """
        messages, estimated = self.window.build(task, tools or [])
        self._set_state("thinking", task)
        model = self.services.model_for(task.agent)
        completion = stream_reply(
            task, model, messages, tools or [], lambda: self._set_state("streaming", task)
        )
        if completion.usage.prompt_tokens and task.depth == 0:
            self.window.observe_usage(estimated, completion.usage.prompt_tokens)
        return completion

    # --- condensing the context outside a task (core/context_window.py) --------------

    def begin_compaction(self, instructions: str | None = None) -> CancelToken | None:
        """Ask for the history to be condensed: now (returns the token `run_compaction`
        takes) or, while a task runs, before its next model call (returns None).

        Raises NothingToCondense, or TaskBusy while a condensation runs.
        """
        with self._lock:
            if self._compacting is not None:
                raise TaskBusy("the context is already being condensed")
            if self.task is not None:
                self.window.request(instructions)
                return None
            if not self.window.condensable(self._conversation, self.agent):
                raise NothingToCondense(
                    "Nothing to condense yet: the first message and the newest turn are always "
                    "kept as they are, and nothing else comes before the newest turn."
                )
            self._compacting = CancelToken()
            return self._compacting

    def run_compaction(self, cancel: CancelToken, instructions: str | None = None) -> Outcome:
        """Condense the history outside any task; its events go out as a task's do."""
        conversation = self._conversation
        assert conversation is not None
        try:
            return self.window.condense_now(
                conversation, self.agent, self.approval, cancel, instructions
            )
        finally:
            with self._lock:
                self._compacting = None
            conversation.update_meta(last_seq=self._seq)

    # --- events and records -----------------------------------------------------------

    def _report(self, event: Event) -> None:
        with self._lock:
            self._seq += 1
            event.conversation_id, event.seq = self.conversation_id, self._seq
            if isinstance(event, Done) and event.depth is None:
                try:
                    self._keep_end(event)
                except OSError:  # the done goes out all the same: no client waits for ever
                    log.exception("could not store a task's end")
            self.sink(event)

    def _record(self, role: str, content: str, **fields: Any) -> dict[str, Any]:
        """Append a history record stamped with the seq of the last event before it."""
        with self._lock:
            if self._conversation is None:
                raise RuntimeError("no conversation: begin_task first")
            return self._conversation.append(role, content, seq=self._seq, **fields)

    def _set_state(self, state: TaskState, task: Task, *, force: bool = False) -> None:
        if state == self.state and not force:
            return
        self.state = state
        task.report(Status(state, self.iteration, self.context_usage))
