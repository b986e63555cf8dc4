"""How a task runs: build the context, call the model, run the calls, repeat.

`AgentLoop.loop` is that loop, whole. The agent's mode says what drives it (core/modes.py):
`plain` answers once without tools, `react` is the loop, `plan_execute` plans and runs each
step as a loop of its own. Handing work to another agent is a tool like any other: its call
runs the sub-agent's task to its end and returns the final report.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.agent_specs import AgentSpec
from core.context_window import ContextWindow
from core.model_call import stream_reply
from core.modes import delegation_tool, run_agent
from core.services import AgentServices
from core.status import StatusLine
from core.task import MAX_DEPTH, LoopEnd, Task
from core.tool_step import ToolStep
from core.toolset import ToolSet
from model.completion import Completion
from model.tool_calls import ToolCall
from modules.results import ToolResult
from modules.tools.catalogue import tools_off
from protocol.events import DoneReason
from protocol.options import Approval


@dataclass(eq=False)
class AgentLoop:
    """Runs tasks with the collaborators it is given: the context window, the tool step and
    the status line of one conversation."""

    services: AgentServices
    window: ContextWindow
    tool_step: ToolStep
    status: StatusLine

    def run(self, task: Task) -> DoneReason:
        """Run the task the way its agent works."""
        return run_agent(self, task)

    def loop(self, task: Task, tools: ToolSet) -> LoopEnd:
        """Build the context, call the model, run its calls, repeat: until it answers without
        a call, a call ends the loop (a plan step's end), or the agent's model calls run out."""
        for iteration in range(1, self.budget(task) + 1):
            task.iteration = iteration
            if task.depth == 0:
                self.status.iteration = iteration
            task.cancel.raise_if_cancelled()
            completion = self.call_model(task, tools)
            if not completion.tool_calls:
                return LoopEnd("complete", completion)
            results = self.run_tools(task, completion.tool_calls, tools)
            if any(result.ends_loop for result in results):
                return LoopEnd("complete", completion)
        return LoopEnd("max_iterations")

    def call_model(
        self, task: Task, tools: ToolSet | None, require: str | None = None
    ) -> Completion:
        """One streamed model call on the task's transcript, recorded when it ends; `tools`
        None sends no `tools` parameter at all (a plain answer); `require` names the tool
        the reply must call (a provider may still answer without it). Raises BudgetReached,
        before the call, when a budget is used up."""
        if task.budgets is not None:
            task.budgets.check()
        schemas = tools.schemas() if tools is not None else []
        messages, estimated = self.window.build(task, schemas)
        self.status.set("thinking", task)
        model = task.setup.model_for(task.agent)
        completion = stream_reply(
            task,
            model,
            messages,
            schemas,
            lambda: self.status.set("streaming", task),
            estimated,
            require,
        )
        if completion.usage.prompt_tokens and not completion.usage.estimated and task.depth == 0:
            usage = completion.usage
            self.window.observe_usage(estimated, usage.prompt_tokens, usage.completion_tokens)
        task.repeats.after_reply(completion)
        return completion

    def run_tools(self, task: Task, calls: list[ToolCall], tools: ToolSet) -> list[ToolResult]:
        """Run one turn's calls in order, each result recorded before the next starts; then
        end the task (RepeatLoop) if it repeats itself past its warning."""
        results = self.tool_step.run(task, calls, tools)
        task.repeats.raise_if_stopped()
        return results

    def tools_for(self, agent: AgentSpec, approval: Approval, parent: Task | None) -> ToolSet:
        """What `agent` may call in `approval` mode: its share of the registry, and one
        `delegate_to_NAME` per agent it may hand work to (under `parent`), but at the
        deepest level of delegation."""
        off = tools_off(self.services.settings)
        tools = ToolSet(self.services.tools, agent, approval, off=off)
        depth = parent.depth if parent is not None else 0
        if depth >= MAX_DEPTH:
            return tools
        agents = self.services.agents
        return tools.with_own(delegation_tool(agents.get(n), self, parent) for n in agent.agents)

    def budget(self, task: Task) -> int:
        """How many model calls the task's agent may make."""
        return task.agent.max_iterations or self.services.settings.max_iterations
