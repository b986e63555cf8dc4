"""The agent loop for one conversation: build messages, stream the model, run tools, persist."""

from __future__ import annotations

import logging
import threading
import uuid
from datetime import UTC, datetime
from typing import Any

from core.approval import ApprovalGate, preview
from core.events import (
    ContextUsage,
    Done,
    DoneReason,
    Error,
    Event,
    FileTree,
    Status,
    TaskState,
    Thinking,
    Token,
    ToolEvent,
)
from core.services import AgentServices
from modules.context import ToolContext
from modules.file_tree import describe_tree
from modules.focus import FocusFiles
from modules.results import ToolError, ToolResult
from modules.undo import TaskJournal, UndoResult
from utils.api_client import ApiError, StreamInterrupted
from utils.cancel import CancelToken, TaskCancelled
from utils.completion import (
    Completion,
    ContentDelta,
    ReasoningDelta,
    StreamEnd,
    StreamItem,
    Usage,
)
from utils.context_manager import ContextBuilder
from utils.conversation_store import LEAF, Conversation
from utils.logger import log_context
from utils.prompts import render_system_prompt
from utils.settings import Approval, Mode
from utils.tool_calls import ToolCall, ToolCallArgs, ToolCallStarted

log = logging.getLogger(__name__)

REPEAT_WARNING_AFTER = 8
CANCELLED_TOOL_OUTPUT = "Cancelled: the user stopped the task before this call finished."


class TaskBusy(Exception):
    """A task is already running in this conversation."""


def thinking_for(mode: Mode, iteration: int) -> bool:
    """Seed policy: `thinking` thinks on the first model call of a task only."""
    return mode == "thinking" and iteration == 1


class _StreamState:
    """What one model call has produced so far, kept for an interrupted answer."""

    def __init__(self) -> None:
        self.content: list[str] = []
        self.reasoning: list[str] = []
        self.tool_names: dict[str, str] = {}

    def partial(self) -> Completion:
        return Completion(content="".join(self.content), reasoning_content="".join(self.reasoning))


class MainTerminal:
    """Runs tasks in one conversation and reports every step through `emit`."""

    def __init__(
        self,
        services: AgentServices,
        conversation_id: str | None = None,
        *,
        mode: Mode | None = None,
        approval: Approval | None = None,
    ) -> None:
        self.services = services
        self.settings = services.settings
        self.mode: Mode = mode or self.settings.mode
        self.approval: Approval = approval or self.settings.approval
        self.context = ContextBuilder(services.provider.context_window)
        self.gate = ApprovalGate()
        self.iteration = 0
        self.state: TaskState = "idle"
        self.context_usage = ContextUsage(0, self.context.limit_tokens)
        self._conversation: Conversation | None = None
        self.focus = FocusFiles()
        self._seq = 0
        self._emit_lock = threading.Lock()
        self._task_lock = threading.Lock()
        self._running = False
        self._cancel = CancelToken()
        self._repeat: tuple[str, int] = ("", 0)
        self._journal: TaskJournal | None = None
        if conversation_id is not None:
            self.open_conversation(conversation_id)

    # --- what fronts override and call -------------------------------------------------

    def emit(self, event: str, payload: dict[str, Any]) -> None:
        """Deliver one event; fronts override this."""

    @property
    def conversation_id(self) -> str | None:
        return self._conversation.id if self._conversation else None

    @property
    def conversation(self) -> Conversation | None:
        return self._conversation

    @property
    def running(self) -> bool:
        return self._running

    @property
    def last_seq(self) -> int:
        return self._seq

    def open_conversation(self, conversation_id: str) -> None:
        """Switch to a stored conversation (raises ConversationNotFound)."""
        conversation = self.services.store.get(conversation_id)
        stored = conversation.meta.get("meta", {})
        self._conversation = conversation
        self.focus = FocusFiles(list(stored.get("focus", [])))
        self._seq = int(stored.get("last_seq", 0))

    def new_conversation(self) -> None:
        """Start afresh; the conversation is created by the next task."""
        self._conversation = None
        self.focus = FocusFiles()
        self._seq = 0

    def save_focus(self) -> None:
        """Persist the focus files with the conversation, when there is one yet."""
        if self._conversation is not None:
            self._conversation.update_meta(focus=self.focus.paths())

    def cancel(self) -> bool:
        """Stop the running task at once; False when nothing runs."""
        if not self._running:
            return False
        self._cancel.cancel()
        return True

    def approve(self, call_id: str, approved: bool, *, always: bool = False) -> bool:
        """Answer a call waiting for approval; False when no such call waits."""
        return self.gate.answer(call_id, approved, always=always)

    def undo(self, message_id: str | None = None) -> UndoResult:
        """Put back what a task changed in the workspace (default: the last); raises TaskBusy."""
        with self._task_lock:
            if self._running:
                raise TaskBusy("a task is running in this conversation; undo when it ends")
            return self.services.journal.undo(self.conversation_id or "", message_id)

    def handle_task(self, text: str, *, parent_id: str | None = LEAF) -> DoneReason:
        """Record the user's message and run the task to its end."""
        return self.run_task(self.begin_task(text, parent_id=parent_id))

    def begin_task(self, text: str, *, parent_id: str | None = LEAF) -> dict[str, Any]:
        """Record the user message under `parent_id` (None: a new root; default: the leaf).

        Claims the conversation for the task; raises TaskBusy, or KeyError for an unknown parent.
        """
        with self._task_lock:
            if self._running:
                raise TaskBusy("a task is already running in this conversation")
            if self._conversation is None:
                self._conversation = self.services.store.create()
            conversation = self._conversation
            if parent_id not in (LEAF, None) and parent_id not in conversation.index:
                raise KeyError(f"no message {parent_id!r} in this conversation")
            record = conversation.append("user", text, parent_id=parent_id)
            self._journal = self.services.journal.task(conversation.id, record["id"])
            self._running = True
            self._cancel = CancelToken()
        return record

    def run_task(self, user_record: dict[str, Any]) -> DoneReason:
        """Run the loop for a task begun with `begin_task`; always ends with a `done` event."""
        usage = Usage()
        fields = {"trace_id": uuid.uuid4().hex, "conversation_id": self.conversation_id,
                  "provider": self.services.provider.name, "model": self.services.provider.model}
        with log_context(**fields):
            log.info("task started", extra={"fields": {"prompt": user_record["content"],
                                                        "message_id": user_record["id"]}})
            reason = self._run_guarded(usage)
            log.info("task ended", extra={"fields": {"reason": reason, **vars(usage)}})
        self._finish(reason, usage)
        return reason

    # --- the loop ---------------------------------------------------------------------

    def _run_guarded(self, usage: Usage) -> DoneReason:
        try:
            return self._loop(usage)
        except TaskCancelled:
            return "cancelled"
        except ApiError as exc:
            self._report(Error(exc.code, str(exc)))
            return "error"
        except Exception as exc:
            log.exception("task crashed")
            self._report(Error("internal_error", f"{type(exc).__name__}: {exc}"))
            return "error"

    def _loop(self, usage: Usage) -> DoneReason:
        self._repeat = ("", 0)
        for iteration in range(1, self.settings.max_iterations + 1):
            self.iteration = iteration
            self._cancel.raise_if_cancelled()
            completion = self._call_model(thinking_for(self.mode, iteration), usage)
            if not completion.tool_calls:
                return "complete"
            self._run_tools(completion.tool_calls)
        return "max_iterations"

    def _finish(self, reason: DoneReason, usage: Usage) -> None:
        with self._task_lock:
            self._running = False
        self._set_state("idle", force=True)
        self._report(Done(reason, usage))
        self._require_conversation().update_meta(focus=self.focus.paths(), last_seq=self._seq)

    # --- the model call ---------------------------------------------------------------

    def _call_model(self, thinking: bool, usage: Usage) -> Completion:
        messages, estimated = self._build_context()
        self._set_state("thinking")
        message_id = uuid.uuid4().hex
        state = _StreamState()
        with log_context(message_id=message_id):
            try:
                stream = self.services.model.stream(
                    messages, self._tool_schemas(), thinking=thinking, cancel=self._cancel
                )
                completion = self._consume(stream, message_id, state)
            except (TaskCancelled, StreamInterrupted) as exc:
                reason = "cancelled" if isinstance(exc, TaskCancelled) else "stream_cut"
                self._record_partial(message_id, state.partial(), reason)
                raise
        usage.add(completion.usage)
        if completion.usage.prompt_tokens:
            self.context.observe_usage(estimated, completion.usage.prompt_tokens)
        log.info("model reply", extra={"fields": {
            "message_id": message_id, "reply": completion.content,
            "tool_calls": len(completion.tool_calls)}})
        self._require_conversation().append(
            "assistant", completion.content, id=message_id, **_assistant_fields(completion)
        )
        return completion

    def _consume(self, stream: Any, message_id: str, state: _StreamState) -> Completion:
        for item in stream:
            completion = self._on_stream_item(item, message_id, state)
            if completion is not None:
                return completion
        raise StreamInterrupted("the model stream ended without a final chunk", state.partial())

    def _on_stream_item(
        self, item: StreamItem, message_id: str, state: _StreamState
    ) -> Completion | None:
        if isinstance(item, ContentDelta):
            state.content.append(item.text)
            self._set_state("streaming")
            self._report(Token(message_id, item.text))
        elif isinstance(item, ReasoningDelta):
            state.reasoning.append(item.text)
            self._report(Thinking(message_id, item.text))
        elif isinstance(item, ToolCallStarted):
            state.tool_names[item.call_id] = item.name
            self._report(ToolEvent(item.call_id, item.name, "start"))
        elif isinstance(item, ToolCallArgs):
            name = state.tool_names.get(item.call_id, "")
            self._report(ToolEvent(item.call_id, name, "args", delta=item.delta))
        elif isinstance(item, StreamEnd):
            return item.completion
        return None

    def _record_partial(self, message_id: str, partial: Completion, reason: str) -> None:
        if not (partial.content or partial.reasoning_content):
            return
        self._require_conversation().append(
            "assistant", partial.content, id=message_id,
            reasoning_content=partial.reasoning_content or None, meta={"interrupted": reason},
        )

    def _build_context(self) -> tuple[list[dict[str, Any]], int]:
        services, conversation = self.services, self._require_conversation()
        prompt = render_system_prompt(
            workspace_root=str(services.workspace.root),
            tree=describe_tree(services.workspace, services.annotations),
            memory=services.memory.read("main", conversation.id),
            task_memory=services.memory.read("task", conversation.id),
            focus=self.focus.contents(services.workspace),
            now=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        )
        built = self.context.build(prompt, conversation.path())
        self.context_usage = ContextUsage(built.estimated_tokens, self.context.limit_tokens)
        return built.messages, built.estimated_tokens

    def _tool_schemas(self) -> list[dict[str, Any]]:
        return self.services.tools.schemas(read_only=self.approval == "read-only")

    # --- tools ------------------------------------------------------------------------

    def _run_tools(self, calls: list[ToolCall]) -> None:
        for position, call in enumerate(calls):
            try:
                self._cancel.raise_if_cancelled()
                self._run_tool(call)
            except TaskCancelled:
                for unanswered in calls[position:]:
                    self._record_tool(unanswered, ToolResult(False, CANCELLED_TOOL_OUTPUT))
                raise

    def _run_tool(self, call: ToolCall) -> None:
        self._set_state("tool")
        registry = self.services.tools
        try:
            tool, args = registry.parse_arguments(call.name, call.arguments)
        except ToolError as exc:
            self._report(ToolEvent(call.id, call.name, "end", arguments=call.arguments))
            self._finish_tool(call, ToolResult(False, str(exc)))
            return
        sent = args.model_dump(exclude_unset=True)
        self._report(ToolEvent(call.id, call.name, "end", arguments=sent))
        if self.approval == "read-only" and not tool.read_only:
            message = f"{call.name} is not available: the conversation is in read-only mode."
            self._finish_tool(call, ToolResult(False, message))
            return
        if not self._approved(call, args.model_dump()):
            declined = f"The user declined this {call.name} call. Do not retry it as is."
            self._finish_tool(call, ToolResult(False, declined))
            return
        self._finish_tool(call, registry.run(tool, args, self._tool_context(call)))

    def _approved(self, call: ToolCall, arguments: dict[str, Any]) -> bool:
        workspace = self.services.workspace
        if not self.gate.needs_approval(self.approval, call.name, arguments, workspace):
            return True
        self.gate.open(call.id, call.name)
        shown = preview(call.name, arguments, workspace)
        self._report(ToolEvent(call.id, call.name, "approval", preview=shown))
        return self.gate.wait(call.id, self._cancel)

    def _tool_context(self, call: ToolCall) -> ToolContext:
        services = self.services

        def on_output(delta: str) -> None:
            self._report(ToolEvent(call.id, call.name, "output", delta=delta))

        return ToolContext(
            settings=self.settings, workspace=services.workspace, runner=services.runner,
            memory=services.memory, annotations=services.annotations, focus=self.focus,
            conversation_id=self._require_conversation().id, cancel=self._cancel,
            on_output=on_output, journal=self._journal, proposals=services.proposals,
        )

    def _finish_tool(self, call: ToolCall, result: ToolResult) -> None:
        output = result.output + self._repeat_warning(call.name)
        self._report(ToolEvent(call.id, call.name, "result", ok=result.ok, output=output,
                               duration_ms=result.duration_ms, details=result.details or None))
        if result.changes:
            self._report(FileTree(result.changes))
        self._record_tool(call, ToolResult(result.ok, output, result.duration_ms,
                                           details=result.details))

    def _repeat_warning(self, name: str) -> str:
        last, count = self._repeat
        count = count + 1 if name == last else 1
        self._repeat = (name, count)
        if count < REPEAT_WARNING_AFTER:
            return ""
        return (f"\n\n[warning] {name} has now been called {count} times in a row. "
                "If this is not making progress, change approach or finish the task.")

    def _record_tool(self, call: ToolCall, result: ToolResult) -> None:
        self._require_conversation().append(
            "tool", result.output, tool_call_id=call.id, name=call.name,
            meta={"ok": result.ok, "duration_ms": result.duration_ms, **result.details},
        )

    # --- events -----------------------------------------------------------------------

    def _report(self, event: Event) -> None:
        with self._emit_lock:
            self._seq += 1
            payload = {"conversation_id": self.conversation_id, "seq": self._seq,
                       **event.payload()}
            self.emit(event.name, payload)

    def _set_state(self, state: TaskState, *, force: bool = False) -> None:
        if state == self.state and not force:
            return
        self.state = state
        self._report(Status(state, self.iteration, self.context_usage))

    def _require_conversation(self) -> Conversation:
        if self._conversation is None:
            raise RuntimeError("no conversation: begin_task first")
        return self._conversation


def _assistant_fields(completion: Completion) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    if completion.reasoning_content:
        fields["reasoning_content"] = completion.reasoning_content
    if completion.tool_calls:
        fields["tool_calls"] = [call.to_message() for call in completion.tool_calls]
    return fields
