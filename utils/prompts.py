"""Prompts rendered from the Jinja2 templates under templates/prompts/."""

from __future__ import annotations

import functools
import re
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import Any

from jinja2 import FileSystemLoader, StrictUndefined, Template, TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment

from utils.plain_templates import check_plain

TEMPLATE_DIR = Path(__file__).resolve().parent.parent / "templates" / "prompts"
SYSTEM_TEMPLATE = "system.md.j2"
# What an agent's own template is given; `tools`: the names of the tools its task is offered.
ROLE_VARIABLES = ("workspace_root", "now", "tools")
MAX_ROLE_CHARS = 256_000  # an agent's rendered template; more is an error
_COMPILED = 32  # agents' templates kept compiled
_BACKTICK_RUN = re.compile(r"`{3,}")


class PromptRenderer:
    """Renders the templates of one folder; a missing variable is an error, not a blank. The
    environment is Jinja2's sandbox: an agent's template may come from the workspace, which
    commands write, and is rendered outside their sandbox."""

    def __init__(self, template_dir: Path = TEMPLATE_DIR) -> None:
        self._env = ImmutableSandboxedEnvironment(
            loader=FileSystemLoader(str(template_dir)),
            autoescape=False,
            undefined=StrictUndefined,
            keep_trailing_newline=True,
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self._compiled = functools.lru_cache(maxsize=_COMPILED)(self._compile)

    def render(self, template_name: str, **variables: Any) -> str:
        """Render one template with exactly the given variables."""
        return self._env.get_template(template_name).render(**variables)

    def render_string(self, source: str, **variables: Any) -> str:
        """Render a template given as text (an agent's system prompt); TemplateError when its
        output passes MAX_ROLE_CHARS."""
        return _at_most(self._compiled(source).generate(**variables), MAX_ROLE_CHARS)

    def check_plain(self, source: str, variables: Collection[str] = ROLE_VARIABLES) -> None:
        """Refuse (TemplateError) a template that is more than text, `variables` and conditions
        on them (utils/plain_templates.py); check before it is ever compiled."""
        check_plain(self._env, source, variables)

    def _compile(self, source: str) -> Template:
        return self._env.from_string(source)


@functools.lru_cache(maxsize=8)
def prompt_renderer(template_dir: Path = TEMPLATE_DIR) -> PromptRenderer:
    """A renderer for `template_dir`, built once (templates are cached by Jinja2)."""
    return PromptRenderer(template_dir)


def _at_most(chunks: Iterator[str], limit: int) -> str:
    parts, size = [], 0
    for chunk in chunks:
        size += len(chunk)
        if size > limit:
            raise TemplateError(f"it renders to over {limit:,} characters")
        parts.append(chunk)
    return "".join(parts)


def code_fence(text: str) -> str:
    """A backtick fence longer than any backtick run inside `text`."""
    longest = max((len(m.group()) for m in _BACKTICK_RUN.finditer(text)), default=2)
    return "`" * (longest + 1)


def _focus_blocks(focus: list[tuple[str, str]]) -> list[dict[str, str]]:
    blocks = []
    for path, content in focus:
        body = content if content.endswith("\n") or not content else content + "\n"
        blocks.append(
            {
                "path": path,
                "content": body,
                "fence": code_fence(content),
                "language": Path(path).suffix.lstrip("."),
            }
        )
    return blocks


def render_system_prompt(
    *,
    workspace_root: str,
    tree: str,
    memory: str,
    task_memory: str,
    focus: list[tuple[str, str]],
    now: str,
    role: str | None = None,
    skills: str = "",
    extra: str = "",
    tools: Collection[str] = (),
) -> str:
    """The system prompt: role and rules (an agent's own template, or the default ones),
    skills, workspace tree, memories, focus files and the time; `tools`, the names of the
    tools offered, are the agent's template's to mention only what it has."""
    renderer = prompt_renderer()
    if role:
        try:
            role = renderer.render_string(
                role, workspace_root=workspace_root, now=now, tools=list(tools)
            ).strip()
        except TemplateError as exc:
            raise TemplateError(f"the agent's system prompt does not render: {exc}") from None
    return renderer.render(
        SYSTEM_TEMPLATE,
        role=role or "",
        skills=skills.strip(),
        workspace_root=workspace_root,
        tree=tree.rstrip("\n"),
        tree_fence=code_fence(tree),
        memory=memory.strip(),
        task_memory=task_memory.strip(),
        focus=_focus_blocks(focus),
        now=now,
        extra=extra.strip(),
    )
