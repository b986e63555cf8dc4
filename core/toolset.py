"""The tools one task may call, and for each call whether it may run.

An agent is offered the registry's tools its allow-list names (the reading ones only in
`read-only` mode; none that is off for want of its configuration, such as `web_search`
without a Tavily key), plus the task's own: a plan step's `finish_step`, the `delegate_to_NAME`
tools of the agents it may hand work to. What is offered is exactly what may run: a call to
anything else is refused with a message the model can act on. Whether an allowed call waits
for the user is the ApprovalGate's to say.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from core.agent_specs import AgentSpec
from modules.results import ToolError
from modules.tools.registry import Tool, ToolRegistry, parse_arguments
from protocol.options import Approval


@dataclass
class ToolSet:
    """The registry seen through one agent and approval mode, plus the task's own tools."""

    registry: ToolRegistry | None  # None: only the task's own tools (asking for a plan)
    agent: AgentSpec
    approval: Approval
    own: dict[str, Tool] = field(default_factory=dict)
    off: Mapping[str, str] = field(default_factory=dict)  # switched off: name -> why

    @classmethod
    def only(cls, agent: AgentSpec, approval: Approval, tools: Iterable[Tool]) -> ToolSet:
        """Nothing but `tools`."""
        return cls(None, agent, approval, {tool.name: tool for tool in tools})

    def with_own(self, tools: Iterable[Tool]) -> ToolSet:
        """This set plus `tools`."""
        own = self.own | {tool.name: tool for tool in tools}
        return ToolSet(self.registry, self.agent, self.approval, own, self.off)

    def schemas(self) -> list[dict[str, Any]]:
        """The OpenAI `tools` entries the model is offered."""
        offered = [t.schema() for t in self._registry_tools() if self._allowed(t)]
        return offered + [tool.schema() for tool in self.own.values()]

    def parse(self, name: str, arguments: str) -> tuple[Tool, BaseModel]:
        """The tool a call names and its checked arguments; ToolError when it does not exist."""
        if name in self.own:
            tool = self.own[name]
            return tool, parse_arguments(tool, arguments)
        if self.registry is None:
            raise ToolError(f"Unknown tool {name!r}. Available tools: {', '.join(self.own)}")
        return self.registry.parse_arguments(name, arguments)

    def refusal(self, tool: Tool) -> str | None:
        """Why this task may not run `tool`, or None when it may."""
        if tool.name in self.own:
            return None
        if tool.name in self.off:
            return f"{tool.name} is off: {self.off[tool.name]}."
        if not self.agent.allows(tool.name):
            return f"{tool.name} is not available to the {self.agent.name} agent."
        if not self._allowed(tool):
            return f"{tool.name} is not available: the conversation is in read-only mode."
        return None

    def _allowed(self, tool: Tool) -> bool:
        if tool.name in self.off or not self.agent.allows(tool.name):
            return False
        return tool.read_only or self.approval != "read-only"

    def _registry_tools(self) -> list[Tool]:
        return [] if self.registry is None else self.registry.tools()
