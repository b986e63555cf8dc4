"""One model turn's tool calls: parsed, approved or declined, run within their limits, reported."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field, replace
from typing import Any

from core.approval import ApprovalGate, held_preview, planned_change, preview
from core.interrupted_calls import INTERRUPTED_CALL
from core.services import AgentServices
from core.status import StatusLine
from core.task import Task
from core.toolset import ToolSet
from model.tool_calls import ToolCall
from modules.results import ToolError, ToolResult
from modules.tools.focus import FocusFiles
from modules.tools.registry import Tool
from modules.tools.tool_context import ToolContext
from modules.undo.config_hold import ConfigWatch
from modules.workspace.protected import ProtectedPaths
from protocol.events import FileTree, ToolEvent
from utils.cancel import TaskCancelled, run_bounded

CANCELLED_TOOL_OUTPUT = "Cancelled: the user stopped the task before this call finished."
COMMAND_LIMIT_GRACE_SECONDS = 15.0  # past a command's own timeout, for killing and draining it


@dataclass(eq=False)
class ToolStep:
    """Runs the tool calls of one model turn of a task, reporting through the task."""

    services: AgentServices
    gate: ApprovalGate
    status: StatusLine
    focus: FocusFiles
    protected: ProtectedPaths = field(init=False)
    config: ConfigWatch = field(init=False)

    def __post_init__(self) -> None:
        self.protected = ProtectedPaths(self.services.workspace.root)
        self.config = ConfigWatch(self.services.journal, self.protected)

    def run(self, task: Task, calls: list[ToolCall], tools: ToolSet) -> list[ToolResult]:
        """Run the calls in order, each result recorded before the next call starts."""
        results = []
        for position, call in enumerate(calls):
            try:
                task.cancel.raise_if_cancelled()
                results.append(self._run_one(task, call, tools))
            except TaskCancelled:
                shutdown = task.cancel.reason == "shutdown"
                output = INTERRUPTED_CALL if shutdown else CANCELLED_TOOL_OUTPUT
                details = {} if shutdown else {"cancelled": True}  # the page shows it stopped
                for unanswered in calls[position:]:
                    self._record_tool(task, unanswered, ToolResult(False, output, details=details))
                raise
        return results

    def _run_one(self, task: Task, call: ToolCall, tools: ToolSet) -> ToolResult:
        self.status.set("tool", task)
        try:
            tool, args = tools.parse(call.name, call.arguments)
        except ToolError as exc:
            task.report(ToolEvent(call.id, call.name, "end", arguments=call.arguments))
            return self._finish(task, call, ToolResult(False, str(exc)))
        task.report(
            ToolEvent(call.id, call.name, "end", arguments=args.model_dump(exclude_unset=True))
        )
        refusal = tools.refusal(tool)
        if refusal is not None:
            return self._finish(task, call, ToolResult(False, refusal))
        if not self._approved(task, call, tool, args):
            declined = f"The user declined this {call.name} call. Do not retry it as is."
            return self._finish(task, call, ToolResult(False, declined, declined=True))
        if tool.runs_code:
            return self._finish(task, call, self._run_watched(task, call, tool, args))
        return self._finish(task, call, self._execute(task, call, tool, args))

    def _run_watched(self, task: Task, call: ToolCall, tool: Tool, args: Any) -> ToolResult:
        """Run a command; what it changed in the program's own configuration stays only when
        the user approves it (no answer, a decline or a stop put it back)."""
        with self.config.around() as watch:
            try:
                result = self._execute(task, call, tool, args)
                held = watch.changes()
                approved = held is None or self._ask(task, call, *held_preview(held))
            except TaskCancelled:  # nobody approved what it changed
                if (held := watch.changes()) is not None:
                    held.decide(approved=False)
                raise
            if held is None:
                return result
            return replace(result, output=result.output + held.decide(approved))

    def _execute(self, task: Task, call: ToolCall, tool: Tool, args: Any) -> ToolResult:
        """Run the call, giving up on it past its limit or a moment after a cancel."""
        settings = self.services.settings
        live = threading.Event()
        live.set()
        context = self._context(task, call, live)
        if tool.inline:
            return self.services.tools.run(tool, args, context)
        if "timeout" in type(args).model_fields:  # a command: its own timeout, then its kill
            limit = (args.timeout or settings.command_timeout) + COMMAND_LIMIT_GRACE_SECONDS
        else:
            limit = tool.time_limit or settings.tool_timeout
        try:
            return run_bounded(
                lambda: self.services.tools.run(tool, args, context), task.cancel, limit
            )
        except TimeoutError:
            return ToolResult(
                False,
                f"{call.name} did not finish within {limit:g} s and was "
                "abandoned; what it did so far stays. Try a smaller step.",
            )
        finally:
            live.clear()  # an abandoned call reports nothing more

    def _approved(self, task: Task, call: ToolCall, tool: Tool, args: Any) -> bool:
        workspace = self.services.workspace
        planned = planned_change(tool, args, workspace)
        config = self.protected.reasons(tool.changed_paths(workspace, args))
        if not self.gate.needs_approval(task.approval, tool, planned, config=bool(config)):
            return True
        return self._ask(task, call, *preview(args.model_dump(), planned, config))

    def _ask(self, task: Task, call: ToolCall, shown: str, warnings: list[str]) -> bool:
        """Show the call waiting for approval and wait for the answer; True when approved."""
        self.gate.open(call.id, call.name)
        task.report(
            ToolEvent(call.id, call.name, "approval", preview=shown, warnings=warnings or None)
        )
        return self.gate.wait(call.id, task.cancel)

    def _context(self, task: Task, call: ToolCall, live: threading.Event) -> ToolContext:
        services = self.services

        def on_output(delta: str) -> None:
            if live.is_set():
                task.report(ToolEvent(call.id, call.name, "output", delta=delta))

        return ToolContext(
            settings=services.settings,
            workspace=services.workspace,
            runner=services.runner,
            memory=services.memory,
            annotations=services.annotations,
            focus=self.focus,
            conversation_id=task.conversation.id,
            call_id=call.id,
            cancel=task.cancel,
            on_output=on_output,
            journal=task.journal,
            proposals=services.proposals,
            skills=services.skills,
        )

    def _finish(self, task: Task, call: ToolCall, result: ToolResult) -> ToolResult:
        output = result.output + task.repeats.after_call(
            call.name, call.arguments, result.ok, result.output
        )
        task.report(
            ToolEvent(
                call.id,
                call.name,
                "result",
                ok=result.ok,
                output=output,
                duration_ms=result.duration_ms,
                details=result.details or None,
                declined=result.declined or None,
            )
        )
        if result.changes:
            task.report(FileTree(result.changes))
        recorded = ToolResult(
            result.ok,
            output,
            result.duration_ms,
            details=result.details,
            ends_loop=result.ends_loop,
            declined=result.declined,
        )
        self._record_tool(task, call, recorded)
        return recorded

    def _record_tool(self, task: Task, call: ToolCall, result: ToolResult) -> None:
        meta = {"ok": result.ok, "duration_ms": result.duration_ms, **result.details}
        if result.declined:
            meta["declined"] = True
        task.transcript.append(
            "tool", result.output, tool_call_id=call.id, name=call.name, meta=meta
        )
