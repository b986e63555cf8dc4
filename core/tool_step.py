"""One model turn's tool calls: parsed, approved or declined, run within their limits, reported."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

from core.approval import ApprovalGate, planned_write, preview
from core.events import FileTree, TaskState, ToolEvent
from core.services import AgentServices
from core.task import MAX_DEPTH, Task
from model.tool_calls import ToolCall
from modules.results import ToolError, ToolResult
from modules.tools.focus import FocusFiles
from modules.tools.registry import Tool
from modules.tools.tool_context import ToolContext
from utils.cancel import TaskCancelled, run_bounded

CANCELLED_TOOL_OUTPUT = "Cancelled: the user stopped the task before this call finished."
COMMAND_LIMIT_GRACE_SECONDS = 15.0  # past a command's own timeout, for killing and draining it

DELEGATE_PREFIX = "delegate_to_"
# Runs a sub-agent for a delegating call: (task, call id, agent name, arguments) -> result.
Delegate = Callable[[Task, str, str, dict[str, Any]], ToolResult]


class ToolStep:
    """Runs the tool calls of one model turn of a task, reporting through the task."""

    def __init__(
        self,
        services: AgentServices,
        gate: ApprovalGate,
        *,
        set_state: Callable[[TaskState, Task], None],
        focus: Callable[[], FocusFiles],
        delegate: Delegate,
    ) -> None:
        self.services = services
        self.gate = gate
        self._set_state = set_state
        self._focus = focus
        self._delegate = delegate

    def run(self, task: Task, calls: list[ToolCall]) -> None:
        """Run the calls in order, each result recorded before the next call starts."""
        for position, call in enumerate(calls):
            try:
                task.cancel.raise_if_cancelled()
                self._run_one(task, call)
            except TaskCancelled:
                for unanswered in calls[position:]:
                    self._record_tool(task, unanswered, ToolResult(False, CANCELLED_TOOL_OUTPUT))
                raise

    def _run_one(self, task: Task, call: ToolCall) -> None:
        self._set_state("tool", task)
        if call.name in task.internal_tools or call.name.startswith(DELEGATE_PREFIX):
            self._run_own(task, call)
            return
        registry = self.services.tools
        try:
            tool, args = registry.parse_arguments(call.name, call.arguments)
        except ToolError as exc:
            task.report(ToolEvent(call.id, call.name, "end", arguments=call.arguments))
            self._finish(task, call, ToolResult(False, str(exc)))
            return
        task.report(
            ToolEvent(call.id, call.name, "end", arguments=args.model_dump(exclude_unset=True))
        )
        if not task.agent.allows(call.name):
            refused = f"{call.name} is not available to the {task.agent.name} agent."
            self._finish(task, call, ToolResult(False, refused))
            return
        if task.approval == "read-only" and not tool.read_only:
            message = f"{call.name} is not available: the conversation is in read-only mode."
            self._finish(task, call, ToolResult(False, message))
            return
        if not self._approved(task, call, tool, args):
            declined = f"The user declined this {call.name} call. Do not retry it as is."
            self._finish(task, call, ToolResult(False, declined))
            return
        self._finish(task, call, self._execute(task, call, tool, args))

    def _run_own(self, task: Task, call: ToolCall) -> None:
        """A tool of the task itself (its plan's) or a delegation to a sub-agent."""
        try:
            arguments = json.loads(call.arguments or "{}")
        except ValueError:
            arguments = None
        shown = call.arguments if arguments is None else arguments
        task.report(ToolEvent(call.id, call.name, "end", arguments=shown))
        if not isinstance(arguments, dict):
            problem = f"Arguments for {call.name} must be one JSON object."
            self._finish(task, call, ToolResult(False, problem))
            return
        started = time.monotonic()
        if call.name in task.internal_tools:
            result = task.internal_tools[call.name][1](call.id, arguments)
        else:
            name = call.name.removeprefix(DELEGATE_PREFIX)
            if name not in task.agent.agents or task.depth >= MAX_DEPTH:
                result = ToolResult(False, f"Unknown tool {call.name!r}.")
            else:
                result = self._delegate(task, call.id, name, arguments)
        result.duration_ms = result.duration_ms or int((time.monotonic() - started) * 1000)
        self._finish(task, call, result)

    def _execute(self, task: Task, call: ToolCall, tool: Tool, args: Any) -> ToolResult:
        """Run the call, giving up on it past its limit or a moment after a cancel."""
        settings = self.services.settings
        live = threading.Event()
        live.set()
        context = self._context(task, call, live)
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
        plan = planned_write(tool, args, self.services.workspace)
        if not self.gate.needs_approval(task.approval, tool, plan):
            return True
        self.gate.open(call.id, call.name)
        shown, warnings = preview(args.model_dump(), plan)
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
            focus=self._focus(),
            conversation_id=task.conversation.id,
            cancel=task.cancel,
            on_output=on_output,
            journal=task.journal,
            proposals=services.proposals,
            skills=services.skills,
        )

    def _finish(self, task: Task, call: ToolCall, result: ToolResult) -> None:
        output = result.output + task.repeat_warning(call.name)
        task.report(
            ToolEvent(
                call.id,
                call.name,
                "result",
                ok=result.ok,
                output=output,
                duration_ms=result.duration_ms,
                details=result.details or None,
            )
        )
        if result.changes:
            task.report(FileTree(result.changes))
        self._record_tool(
            task, call, ToolResult(result.ok, output, result.duration_ms, details=result.details)
        )

    def _record_tool(self, task: Task, call: ToolCall, result: ToolResult) -> None:
        task.transcript.append(
            "tool",
            result.output,
            tool_call_id=call.id,
            name=call.name,
            meta={"ok": result.ok, "duration_ms": result.duration_ms, **result.details},
        )
