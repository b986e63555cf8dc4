"""An agent's definition, validated, and the catalogue of those that loaded (core/agent_loader.py
reads them from their files)."""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from protocol.budgets import Budget
from utils.errors import NotFound
from utils.prompts import prompt_renderer
from utils.settings import PROGRAM_DIR, Provider

SHIPPED_AGENTS = PROGRAM_DIR / "agents"
DEFAULT_AGENT = "general"
AgentMode = Literal["plain", "react", "plan_execute"]
PLAIN_PROMPT = "plain_prompt"  # validation context: the template may only be plain (workspace)
_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,39}$")
Names = Annotated[list[Annotated[str, Field(max_length=200)]], Field(max_length=200)]


class AgentSpec(BaseModel):
    """One agent: how it works (`mode`), what it is told, which tools it may use."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(description="lowercase letters, digits, '-' and '_'; unique")
    description: str = Field(min_length=1, max_length=500)
    mode: AgentMode = "react"
    system_prompt: str | None = Field(
        None, description="a Jinja2 template, or the name of a template file beside this one"
    )
    tools: Names = Field(default_factory=lambda: ["*"], description="names or globs")
    provider: Provider | None = Field(None, description="another configured provider")
    model: str | None = Field(None, max_length=200)
    thinking: bool | None = Field(None, description="override the conversation's fast/thinking")
    max_iterations: int | None = Field(None, ge=1, le=200)
    max_replans: int = Field(2, ge=0, le=10)
    budget: Budget | None = Field(
        None, description="what one task of this agent may use, instead of budget_task"
    )
    agents: Names = Field(default_factory=list, description="agents it may delegate to")

    @field_validator("name")
    @classmethod
    def _valid_name(cls, value: str) -> str:
        if not _NAME.match(value):
            raise ValueError("use 1-40 lowercase letters, digits, '-' or '_'")
        return value

    @field_validator("system_prompt")
    @classmethod
    def _renders(cls, value: str | None, info: ValidationInfo) -> str | None:
        """A template that fails (an unknown variable, reaching for Python's internals, which
        the sandboxed renderer refuses) is refused when the agent loads; one from the
        workspace (context PLAIN_PROMPT) may only be plain (utils/plain_templates.py)."""
        if value is None:
            return None
        renderer = prompt_renderer()
        try:
            if info.context and info.context.get(PLAIN_PROMPT):
                renderer.check_plain(value)
            renderer.render_string(value, workspace_root="/workspace", now="now", tools=[])
        except Exception as exc:  # whatever the template's text makes rendering raise
            raise ValueError(f"the template does not render: {exc}") from None
        return value

    def allows(self, tool: str) -> bool:
        """Whether the allow-list names this tool (globs such as `mcp__files__*` allowed)."""
        return any(fnmatch.fnmatchcase(tool, pattern) for pattern in self.tools)


@dataclass
class AgentProblem:
    """A definition that did not load, and why (with the field and line when known)."""

    path: str
    message: str


@dataclass
class AgentCatalog:
    """Every agent that loaded, by name, and the files that did not."""

    agents: dict[str, AgentSpec] = field(default_factory=dict)
    problems: list[AgentProblem] = field(default_factory=list)
    # The shipped and the user's own definitions (DATA_DIR/agents), before the workspace's.
    trusted: dict[str, AgentSpec] = field(default_factory=dict)

    def get(self, name: str | None) -> AgentSpec:
        """The named agent (default: `general`); NotFound names the ones there are."""
        wanted = name or DEFAULT_AGENT
        if wanted not in self.agents:
            known = ", ".join(sorted(self.agents)) or "none"
            raise NotFound(f"no agent {wanted!r}; the agents are: {known}")
        return self.agents[wanted]

    def summaries(self) -> list[dict[str, Any]]:
        """Name, description, mode and sub-agents of each agent, by name."""
        return [_summary(a) for a in sorted(self.agents.values(), key=lambda a: a.name)]

    def trusted_summaries(self) -> list[dict[str, Any]]:
        """`summaries` of the shipped and the user's agents alone, each as its own file says
        (a workspace definition taking one's name changes nothing here): what a task wrote
        never shows."""
        kept = sorted(name for name in self.agents if name in self.trusted)
        return [_summary(self.trusted[name]) for name in kept]


def _summary(agent: AgentSpec) -> dict[str, Any]:
    return {
        "name": agent.name,
        "description": agent.description,
        "mode": agent.mode,
        "agents": agent.agents,
    }
