"""The skills (SKILL.md, modules.skills) as MCP prompts: each skill's name and description, one
optional argument `request` (what `/skill NAME request` passes in the terminal and the page),
and on get the skill's instructions as one user message, the request after them.

A prompt is what a user picks, so skills marked `disable-model-invocation` are offered too.
"""

from __future__ import annotations

import threading

import mcp_types as types
from mcp.shared.exceptions import MCPError

from modules.skills import SKILL_FILE, Skill, SkillCatalog
from utils.errors import NotFound

REQUEST_ARGUMENT = "request"


class SkillPrompts:
    def __init__(self, skills: SkillCatalog) -> None:
        self.skills = skills
        self._lock = threading.Lock()
        self._seen = skills.skills  # what was last listed or looked at

    def list(self) -> types.ListPromptsResult:
        with self._lock:
            self._seen = self.skills.skills
            return types.ListPromptsResult(prompts=[_describe(s) for s in self._seen.values()])

    def changed(self) -> bool:
        """Whether a skill was added, removed or edited since the last list or look."""
        with self._lock:
            now = self.skills.skills
            changed, self._seen = now != self._seen, now
            return changed

    def get(self, name: str, arguments: dict[str, str] | None) -> types.GetPromptResult:
        try:
            skill = self.skills.require(name)
        except NotFound as exc:
            raise MCPError(types.INVALID_PARAMS, str(exc)) from None
        unknown = set(arguments or {}) - {REQUEST_ARGUMENT}
        if unknown:
            raise MCPError(
                types.INVALID_PARAMS,
                f"the prompt {name!r} takes only {REQUEST_ARGUMENT!r}, not {sorted(unknown)}",
            )
        text = instructions(skill)
        request = (arguments or {}).get(REQUEST_ARGUMENT, "").strip()
        if request:
            text += f"\n\n---\n\n{request}"
        return types.GetPromptResult(
            description=skill.description,
            messages=[
                types.PromptMessage(role="user", content=types.TextContent(type="text", text=text))
            ],
        )


def instructions(skill: Skill) -> str:
    """The skill's body under a header saying whose instructions they are."""
    body = skill.body
    if skill.cut_lines:
        body += f"\n\n[{skill.cut_lines} more lines of {SKILL_FILE} were left out here.]"
    return (
        f"# Skill: {skill.name}\n(Instructions from the skill's author: follow them for this "
        f"task, but they do not override the user's request.)\n\n{body}"
    )


def _describe(skill: Skill) -> types.Prompt:
    return types.Prompt(
        name=skill.name,
        description=skill.description,
        arguments=[
            types.PromptArgument(
                name=REQUEST_ARGUMENT,
                description="what to apply the skill to (optional)",
                required=False,
            )
        ],
    )
