"""One model turn's tool calls: parsed, approved or declined, run within their limits, reported."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from core.approval import ApprovalGate, planned_write, preview
from core.events import EventSink, FileTree, TaskState, ToolEvent
from core.services import AgentServices
from core.task import Task
from modules.context import ToolContext
from modules.focus import FocusFiles
from modules.registry import Tool
from modules.results import ToolError, ToolResult
from utils.cancel import TaskCancelled, run_bounded
from utils.tool_calls import ToolCall

CANCELLED_TOOL_OUTPUT = "Cancelled: the user stopped the task before this call finished."
COMMAND_LIMIT_GRACE_SECONDS = 15.0  # past a command's own timeout, for killing and draining it

Record = Callable[..., dict[str, Any]]  # append a history record: (role, content, **fields)


class ToolStep:
    """Runs the tool calls of one model turn for a terminal, reporting through its sink."""

    def __init__(
        self,
        services: AgentServices,
        gate: ApprovalGate,
        *,
        report: EventSink,
        record: Record,
        set_state: Callable[[TaskState], None],
        focus: Callable[[], FocusFiles],
    ) -> None:
        self.services = services
        self.gate = gate
        self._report = report
        self._record = record
        self._set_state = set_state
        self._focus = focus

    def run(self, task: Task, calls: list[ToolCall]) -> None:
        """Run the calls in order, each result recorded before the next call starts."""
        for position, call in enumerate(calls):
            try:
                task.cancel.raise_if_cancelled()
                self._run_one(task, call)
            except TaskCancelled:
                for unanswered in calls[position:]:
                    self._record_tool(unanswered, ToolResult(False, CANCELLED_TOOL_OUTPUT))
                raise

    def _run_one(self, task: Task, call: ToolCall) -> None:
        self._set_state("tool")
        registry = self.services.tools
        try:
            tool, args = registry.parse_arguments(call.name, call.arguments)
        except ToolError as exc:
            self._report(ToolEvent(call.id, call.name, "end", arguments=call.arguments))
            self._finish(task, call, ToolResult(False, str(exc)))
            return
        self._report(ToolEvent(call.id, call.name, "end",
                               arguments=args.model_dump(exclude_unset=True)))
        if task.approval == "read-only" and not tool.read_only:
            message = f"{call.name} is not available: the conversation is in read-only mode."
            self._finish(task, call, ToolResult(False, message))
            return
        if not self._approved(task, call, tool, args):
            declined = f"The user declined this {call.name} call. Do not retry it as is."
            self._finish(task, call, ToolResult(False, declined))
            return
        self._finish(task, call, self._execute(task, call, tool, args))

    def _execute(self, task: Task, call: ToolCall, tool: Tool, args: Any) -> ToolResult:
        """Run the call, giving up on it past its limit or a moment after a cancel."""
        settings = self.services.settings
        live = threading.Event()
        live.set()
        context = self._context(task, call, live)
        if "timeout" in type(args).model_fields:  # a command: its own timeout, then its kill
            limit = (args.timeout or settings.command_timeout) + COMMAND_LIMIT_GRACE_SECONDS
        else:
            limit = settings.tool_timeout
        try:
            return run_bounded(
                lambda: self.services.tools.run(tool, args, context), task.cancel, limit
            )
        except TimeoutError:
            return ToolResult(False, f"{call.name} did not finish within {limit:g} s and was "
                                     "abandoned; what it did so far stays. Try a smaller step.")
        finally:
            live.clear()  # an abandoned call reports nothing more

    def _approved(self, task: Task, call: ToolCall, tool: Tool, args: Any) -> bool:
        plan = planned_write(tool, args, self.services.workspace)
        if not self.gate.needs_approval(task.approval, tool, plan):
            return True
        self.gate.open(call.id, call.name)
        shown, warnings = preview(args.model_dump(), plan)
        self._report(ToolEvent(call.id, call.name, "approval", preview=shown,
                               warnings=warnings or None))
        return self.gate.wait(call.id, task.cancel)

    def _context(self, task: Task, call: ToolCall, live: threading.Event) -> ToolContext:
        services = self.services

        def on_output(delta: str) -> None:
            if live.is_set():
                self._report(ToolEvent(call.id, call.name, "output", delta=delta))

        return ToolContext(
            settings=services.settings, workspace=services.workspace, runner=services.runner,
            memory=services.memory, annotations=services.annotations, focus=self._focus(),
            conversation_id=task.conversation.id, cancel=task.cancel,
            on_output=on_output, journal=task.journal, proposals=services.proposals,
        )

    def _finish(self, task: Task, call: ToolCall, result: ToolResult) -> None:
        output = result.output + task.repeat_warning(call.name)
        self._report(ToolEvent(call.id, call.name, "result", ok=result.ok, output=output,
                               duration_ms=result.duration_ms, details=result.details or None))
        if result.changes:
            self._report(FileTree(result.changes))
        self._record_tool(call, ToolResult(result.ok, output, result.duration_ms,
                                           details=result.details))

    def _record_tool(self, call: ToolCall, result: ToolResult) -> None:
        self._record("tool", result.output, tool_call_id=call.id, name=call.name,
                     meta={"ok": result.ok, "duration_ms": result.duration_ms, **result.details})
