"""Agents defined in files: a YAML or JSON file each, validated, later folders overriding
earlier ones by name (the shipped `agents/`, then `DATA_DIR/agents/`, then the workspace's
`.agents/agents/`). A bad file is reported with its file, field and line; the others load."""

from __future__ import annotations

import fnmatch
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml
from jinja2 import TemplateError
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from utils.budget import Budget
from utils.prompts import prompt_renderer
from utils.settings import PROGRAM_DIR, Provider
from utils.validation import describe_validation_error
from utils.yaml_text import safe_load

SHIPPED_AGENTS = PROGRAM_DIR / "agents"
DEFAULT_AGENT = "general"
AgentMode = Literal["plain", "react", "plan_execute"]
_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,39}$")
_PROMPT_FILE = re.compile(r"^[\w./-]+\.(md|j2|jinja|txt)$")
_SUFFIXES = (".yaml", ".yml", ".json")


class AgentSpec(BaseModel):
    """One agent: how it works (`mode`), what it is told, which tools it may use."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(description="lowercase letters, digits, '-' and '_'; unique")
    description: str = Field(min_length=1, max_length=500)
    mode: AgentMode = "react"
    system_prompt: str | None = Field(
        None, description="a Jinja2 template, or the name of a template file beside this one"
    )
    tools: list[str] = Field(default_factory=lambda: ["*"], description="names or globs")
    provider: Provider | None = Field(None, description="another configured provider")
    model: str | None = None
    thinking: bool | None = Field(None, description="override the conversation's fast/thinking")
    max_iterations: int | None = Field(None, ge=1, le=200)
    max_replans: int = Field(2, ge=0, le=10)
    budget: Budget | None = Field(
        None, description="what one task of this agent may use, instead of budget_task"
    )
    agents: list[str] = Field(default_factory=list, description="agents it may delegate to")

    @field_validator("name")
    @classmethod
    def _valid_name(cls, value: str) -> str:
        if not _NAME.match(value):
            raise ValueError("use 1-40 lowercase letters, digits, '-' or '_'")
        return value

    @field_validator("system_prompt")
    @classmethod
    def _renders(cls, value: str | None) -> str | None:
        """A template that fails (an unknown variable, or reaching for Python's internals,
        which the sandboxed renderer refuses) is refused when the agent loads."""
        if value is not None:
            try:
                prompt_renderer().render_string(value, workspace_root="/workspace", now="now")
            except TemplateError as exc:
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

    def get(self, name: str | None) -> AgentSpec:
        """The named agent (default: `general`); KeyError names the ones there are."""
        wanted = name or DEFAULT_AGENT
        if wanted not in self.agents:
            known = ", ".join(sorted(self.agents)) or "none"
            raise KeyError(f"no agent {wanted!r}; the agents are: {known}")
        return self.agents[wanted]

    def summaries(self) -> list[dict[str, Any]]:
        """Name, description, mode and sub-agents of each agent, by name."""
        return [
            {"name": a.name, "description": a.description, "mode": a.mode, "agents": a.agents}
            for a in sorted(self.agents.values(), key=lambda a: a.name)
        ]


def load_agents(folders: list[Path]) -> AgentCatalog:
    """Read every definition in `folders`, in order: a later one replaces an earlier namesake."""
    catalog = AgentCatalog()
    for folder in folders:
        if not folder.is_dir():
            continue
        for path in sorted(p for p in folder.iterdir() if p.suffix in _SUFFIXES):
            try:
                spec = _load(path)
            except AgentFileError as exc:
                catalog.problems.append(AgentProblem(str(path), str(exc)))
                continue
            catalog.agents[spec.name] = spec
    for spec in list(catalog.agents.values()):
        missing = [name for name in spec.agents if name not in catalog.agents]
        if missing:
            del catalog.agents[spec.name]
            catalog.problems.append(
                AgentProblem(
                    spec.name, f"agent {spec.name!r} delegates to unknown agents: {missing}"
                )
            )
    return catalog


class AgentFileError(ValueError):
    """A definition file that cannot be read or does not validate."""


def _load(path: Path) -> AgentSpec:
    try:
        text = path.read_text(encoding="utf-8")
        data = json.loads(text) if path.suffix == ".json" else safe_load(text)
    except (OSError, UnicodeDecodeError, ValueError, yaml.YAMLError) as exc:
        raise AgentFileError(f"{path.name}: cannot be read: {exc}") from None
    if not isinstance(data, dict):
        raise AgentFileError(f"{path.name}: must be a mapping of fields")
    prompt = data.get("system_prompt")
    if isinstance(prompt, str) and _PROMPT_FILE.match(prompt.strip()):
        beside = path.parent / prompt.strip()
        if beside.is_file() and beside.resolve().parent == path.parent.resolve():
            data = {**data, "system_prompt": beside.read_text(encoding="utf-8")}
    try:
        return AgentSpec.model_validate(data)
    except ValidationError as exc:
        lines = _field_lines(text, path.suffix)
        where = [
            f"{e['loc'][0]} (line {lines[e['loc'][0]]})"
            for e in exc.errors()
            if e["loc"] and e["loc"][0] in lines
        ]
        at = f" at {', '.join(where)}" if where else ""
        raise AgentFileError(f"{path.name}{at}: {describe_validation_error(exc)}") from None


def _field_lines(text: str, suffix: str) -> dict[Any, int]:
    """The line of each top-level key of a definition (1-based), for error messages."""
    if suffix == ".json":
        found = {}
        for number, line in enumerate(text.splitlines(), start=1):
            match = re.match(r'\s*"([^"]+)"\s*:', line)
            if match and match.group(1) not in found:
                found[match.group(1)] = number
        return found
    node = yaml.compose(text)
    if not isinstance(node, yaml.MappingNode):
        return {}
    return {key.value: key.start_mark.line + 1 for key, _ in node.value}
