"""How an agent works: `plain` (one answer, no tools), `react` (the tool loop) or
`plan_execute` (a plan, each step a bounded tool loop, re-planned when a step fails); and
handing a task to a sub-agent, whose final report becomes the delegating call's result."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from pydantic import BaseModel, Field

from core.agent_specs import AgentSpec
from core.budgets import BudgetReached
from core.repeats import RepeatLoop
from core.task import LoopEnd, Task
from core.toolset import ToolSet
from model.completion import Completion
from model.errors import ApiError
from model.tool_calls import ToolCall
from modules.results import ToolError, ToolOutput, ToolResult
from modules.tools.registry import Tool
from modules.tools.tool_context import ToolContext
from protocol.events import DoneReason, Error, PlanEvent, PlanPhase
from protocol.options import Approval
from protocol.records import PlanMeta, PlanStepMeta, StepStatus
from utils.logger import log_context

MAX_STEPS = 12
REPORT_CHARS = 4000
PLAN_PROMPT = (
    "Before doing anything, plan the task above: call make_plan with its steps in order, "
    "each one short sentence saying what to do and what it produces (at most {max} steps). "
    "Do not start the work yet."
)
REPLAN_PROMPT = (
    "Step {index} ({title}) failed: {reason}. Plan the rest of the task again: call "
    "make_plan with the steps still to do (what is done stays done)."
)
STEP_PROMPT = (
    "Step {index} of {total}: {title}\n\nDo this step now with the tools. When it is done, "
    "call finish_step with ok=true and a one-line summary; if it cannot be done, call "
    "finish_step with ok=false and say why."
)
FINISH_PROMPT = (
    "Step {index} ({title}) needs its end now: call finish_step with ok=true and a one-line "
    "summary if it is done, or with ok=false and why if it cannot be done."
)
FINAL_PROMPT = (
    "Every step of the plan is finished. Write the final answer for the user now: what was "
    "done, what came out of it and anything they must know."
)


class Loop(Protocol):
    """What the modes use of the agent loop (core/agent_loop.py)."""

    def run(self, task: Task) -> DoneReason: ...

    def loop(self, task: Task, tools: ToolSet) -> LoopEnd: ...

    def call_model(
        self, task: Task, tools: ToolSet | None, require: str | None = None
    ) -> Completion: ...

    def run_tools(self, task: Task, calls: list[ToolCall], tools: ToolSet) -> list[ToolResult]: ...

    def tools_for(self, agent: AgentSpec, approval: Approval, parent: Task | None) -> ToolSet: ...

    def budget(self, task: Task) -> int: ...


def run_agent(loop: Loop, task: Task) -> DoneReason:
    """Run the task the way its agent works."""
    if task.agent.mode == "plain":
        loop.call_model(task, None)
        return "complete"
    if task.agent.mode == "plan_execute":
        return PlanExecute(loop, task).run()
    return loop.loop(task, loop.tools_for(task.agent, task.approval, task)).reason


# --- plan_execute ---------------------------------------------------------------------------


class MakePlanArgs(BaseModel):
    steps: list[str] = Field(
        min_length=1,
        max_length=MAX_STEPS,
        description="The steps in order; each one short sentence: what to do, what it gives.",
    )


class FinishStepArgs(BaseModel):
    ok: bool = Field(description="true when the step's goal is met; false when it cannot be.")
    summary: str = Field(description="One line: what was done, or why it could not be.")


@dataclass
class PlanStep:
    """One step of the plan and how it went."""

    index: int
    title: str
    status: StepStatus = "pending"
    summary: str | None = None

    def to_wire(self) -> PlanStepMeta:
        wire: PlanStepMeta = {"index": self.index, "title": self.title, "status": self.status}
        if self.summary is not None:
            wire["summary"] = self.summary
        return wire


@dataclass
class Plan:
    """The steps and how each went; `revision` counts re-plans."""

    revision: int = 0
    steps: list[PlanStep] = field(default_factory=list)

    def to_wire(self) -> PlanMeta:
        """As `meta.plan` keeps it and `plan` events send it (docs/protocol.md §8)."""
        return {"revision": self.revision, "steps": [step.to_wire() for step in self.steps]}

    def next_pending(self) -> PlanStep | None:
        return next((s for s in self.steps if s.status == "pending"), None)

    def replace_pending(self, titles: list[str]) -> None:
        """Keep the finished steps; the new titles follow them as pending steps."""
        kept = [s for s in self.steps if s.status in ("done", "failed")]
        self.steps = kept + [
            PlanStep(len(kept) + n, title.strip()) for n, title in enumerate(titles, start=1)
        ]


class PlanExecute:
    """Plan, run each step as a bounded tool loop, re-plan a failed step, then answer."""

    def __init__(self, loop: Loop, task: Task) -> None:
        self.loop, self.task = loop, task
        self.plan = Plan()

    def run(self) -> DoneReason:
        self._make_plan(PLAN_PROMPT.format(max=MAX_STEPS), "created")
        while (step := self.plan.next_pending()) is not None:
            ok, summary = self._run_step(step)
            if ok:
                continue
            if self.plan.revision >= self.task.agent.max_replans:
                self._emit("finished")
                self.task.report(
                    Error(
                        "plan_failed",
                        (
                            f"Step {step.index} failed and the plan was already revised "
                            f"{self.plan.revision} times (max_replans): {summary}"
                        ),
                    )
                )
                return "error"
            self.plan.revision += 1
            prompt = REPLAN_PROMPT.format(index=step.index, title=step.title, reason=summary)
            self._make_plan(prompt, "replanned", reason=summary)
        self.task.transcript.append(
            "user", FINAL_PROMPT, meta={"plan_prompt": "final", "plan": self.plan.to_wire()}
        )
        self.loop.call_model(self.task, None)
        self._emit("finished")
        return "complete"

    def _make_plan(
        self, prompt: str, phase: Literal["created", "replanned"], reason: str | None = None
    ) -> None:
        """Ask for the plan with make_plan as the only tool, required; a reply without it (a
        provider that ignores `tool_choice`) plans from its numbered lines, or one step from
        the request itself."""
        task = self.task
        task.transcript.append(
            "user", prompt, meta={"plan_prompt": phase, "plan": self.plan.to_wire()}
        )
        titles: list[str] = []

        def make_plan(ctx: ToolContext, args: MakePlanArgs) -> ToolOutput:
            titles[:] = args.steps
            self.plan.replace_pending(titles)
            details = {"plan": self.plan.to_wire()}
            return ToolOutput(f"Plan recorded: {len(titles)} steps.", details=details)

        tool = own_tool("make_plan", "Record the plan: the task's steps, in order.", make_plan)
        tools = ToolSet.only(task.agent, task.approval, [tool])
        completion = self.loop.call_model(task, tools, require="make_plan")
        if completion.tool_calls:
            self.loop.run_tools(task, completion.tool_calls, tools)
        if not titles:
            titles = _numbered_lines(completion.content) or [task.user_record["content"][:200]]
            self.plan.replace_pending(titles)
        self._emit(phase, reason=reason)

    def _run_step(self, step: PlanStep) -> tuple[bool, str]:
        task, loop = self.task, self.loop
        step.status = "running"
        self._emit("step_started", step=step.index)
        total = len(self.plan.steps)
        prompt = STEP_PROMPT.format(index=step.index, total=total, title=step.title)
        task.transcript.append(
            "user", prompt, meta={"plan_step": step.index, "plan": self.plan.to_wire()}
        )
        finished: list[tuple[bool, str]] = []

        def finish_step(ctx: ToolContext, args: FinishStepArgs) -> ToolOutput:
            finished.append((args.ok, args.summary.strip()))
            step.status, step.summary = ("done" if args.ok else "failed"), args.summary
            details = {"plan": self.plan.to_wire()}
            return ToolOutput("Step recorded.", details=details, ends_loop=True)

        tool = own_tool("finish_step", "End the current step of the plan.", finish_step)
        tools = loop.tools_for(task.agent, task.approval, task).with_own([tool])
        ended = loop.loop(task, tools)
        answer = ended.reply.content if ended.reply is not None else ""
        if not finished and ended.reason == "complete":
            answer = self._ask_finish(step, tool) or answer
        if finished:
            ok, summary = finished[-1]
        elif ended.reason == "complete":
            ok, summary = True, _first_line(answer) or "done"
        else:
            ok, summary = False, f"it used all {loop.budget(task)} model calls of a step"
        step.status, step.summary = ("done" if ok else "failed"), summary
        self._emit("step_finished", step=step.index, status=step.status, summary=summary)
        return ok, summary

    def _ask_finish(self, step: PlanStep, finish_step: Tool) -> str:
        """The step's loop ended with an answer instead of finish_step: ask for finish_step
        alone, required. A reply that still does not call it ends the step as an answer;
        its text is returned."""
        task = self.task
        prompt = FINISH_PROMPT.format(index=step.index, title=step.title)
        task.transcript.append(
            "user", prompt, meta={"plan_prompt": "finish", "plan": self.plan.to_wire()}
        )
        tools = ToolSet.only(task.agent, task.approval, [finish_step])
        completion = self.loop.call_model(task, tools, require="finish_step")
        if completion.tool_calls:
            self.loop.run_tools(task, completion.tool_calls, tools)
        return completion.content

    def _emit(self, phase: PlanPhase, **fields: Any) -> None:
        self.task.report(PlanEvent(phase, self.plan.to_wire(), **fields))


def own_tool(name: str, description: str, function: Any) -> Tool:
    """A tool of the task itself: it reads nothing of the workspace, never asks, and runs in
    the task's thread."""
    return Tool.typed(name, function, read_only=True, summary=description, inline=True)


def _numbered_lines(text: str) -> list[str]:
    found = re.findall(r"^\s*\d+[.)]\s+(.+)$", text, flags=re.MULTILINE)
    return [line.strip() for line in found][:MAX_STEPS]


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")[:300]


# --- delegation -----------------------------------------------------------------------------


class DelegateArgs(BaseModel):
    task: str = Field(
        min_length=1,
        description="What the agent should do, complete in itself: it sees nothing else of "
        "this conversation.",
    )
    context: str | None = Field(None, description="Facts, paths or earlier results it needs.")


def delegation_tool(agent: AgentSpec, loop: Loop, parent: Task | None) -> Tool:
    """The `delegate_to_NAME` tool that hands a task to `agent` (run under `parent`; None:
    only offered, as when a history is condensed outside a task)."""

    def hand_over(ctx: ToolContext, args: DelegateArgs) -> ToolOutput:
        if parent is None:
            raise ToolError("delegation runs only within a task")
        return delegate(loop, parent, ctx.call_id, agent, args)

    description = (
        f"Hand a task to the {agent.name} agent: {agent.description} It works with its own "
        "tools and returns only its final report."
    )
    return own_tool(f"delegate_to_{agent.name}", description, hand_over)


def delegate(
    loop: Loop, task: Task, call_id: str, agent: AgentSpec, args: DelegateArgs
) -> ToolOutput:
    """Run `agent` on a fresh transcript under `task`; its final report is the result."""
    child = task.child(agent, call_id)
    text = args.task + (f"\n\nContext:\n{args.context}" if args.context else "")
    child.transcript.append("user", text)
    with log_context(agent=agent.name, depth=child.depth):
        try:
            reason = loop.run(child)
        except (ApiError, BudgetReached, RepeatLoop) as exc:
            raise ToolError(f"The {agent.name} agent stopped: {exc}") from None
    answers = [r for r in child.transcript.path() if r["role"] == "assistant" and r["content"]]
    report = answers[-1]["content"][:REPORT_CHARS] if answers else ""
    details = {"agent": agent.name}
    if reason == "complete":
        finished = report or f"The {agent.name} agent finished without a report."
        return ToolOutput(finished, details=details)
    if reason == "max_iterations":
        raise ToolError(
            f"The {agent.name} agent used all {loop.budget(child)} of its model calls "
            f"without finishing. Its last words: {report or '(none)'}",
            details,
        )
    raise ToolError(f"The {agent.name} agent failed: {report or reason}", details)
