"""The system prompt template, rendered for real."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import jinja2
import pytest

from utils.plain_templates import MAX_NODES, MAX_TOKENS
from utils.prompts import (
    MAX_ROLE_CHARS,
    SYSTEM_TEMPLATE,
    PromptRenderer,
    code_fence,
    prompt_renderer,
    render_system_prompt,
)


def _render(**overrides: Any) -> str:
    """render_system_prompt with these arguments, and sample ones for the rest."""
    values: dict[str, Any] = {
        "workspace_root": "/home/me/project",
        "tree": ".\n├── app.py  # Flask entry point\n└── tests/\n",
        "memory": "Run tests with `make test`.",
        "task_memory": "Port 5001 is taken.",
        "focus": [("app.py", "from flask import Flask\napp = Flask(__name__)\n")],
        "now": "2026-11-22 15:30 UTC",
    }
    values.update(overrides)
    return render_system_prompt(**values)


def test_prompt_holds_tree_memories_focus_and_time() -> None:
    text = _render(extra="Answer in French.")
    assert "/home/me/project" in text
    assert "├── app.py  # Flask entry point" in text
    assert "Run tests with `make test`." in text
    assert "Port 5001 is taken." in text
    assert "## app.py\n```py\nfrom flask import Flask\napp = Flask(__name__)\n```" in text
    assert "2026-11-22 15:30 UTC" in text
    assert "Answer in French." in text
    for tool in ("modify_file", "focus_file", "update_memory", "read_file", "timeout"):
        assert tool in text


def test_empty_sections_say_so_and_no_focus_heading() -> None:
    text = _render(memory="", task_memory="  ", focus=[], tree="")
    assert text.count("(empty)") == 3
    assert "# Focus files" not in text
    assert "{{" not in text and "{%" not in text


def test_focus_content_with_backticks_gets_a_longer_fence() -> None:
    readme = "# Title\n```bash\nmake\n```"
    text = _render(focus=[("README.md", readme), ("notes.txt", "")])
    assert f"````md\n{readme}\n````" in text
    assert "## notes.txt\n```txt\n```" in text
    assert code_fence("no ticks") == "```"
    assert code_fence("`````") == "``````"


def test_missing_variable_is_an_error() -> None:
    renderer = prompt_renderer()
    with pytest.raises(jinja2.UndefinedError):
        renderer.render(SYSTEM_TEMPLATE, workspace_root="/w", tree="", memory="")


def test_renderer_for_another_folder(tmp_path: Path) -> None:
    (tmp_path / "hello.j2").write_text("Hello {{ name }}!\n", encoding="utf-8")
    renderer = PromptRenderer(tmp_path)
    assert renderer.render("hello.j2", name="agent") == "Hello agent!\n"
    with pytest.raises(jinja2.UndefinedError):
        renderer.render("hello.j2")
    assert prompt_renderer(tmp_path) is prompt_renderer(tmp_path)


# --- an agent's own template -------------------------------------------------------------------


def test_a_plain_template_passes_and_renders() -> None:
    renderer = prompt_renderer()
    source = (
        "Work in {{ workspace_root }}.\n{% if now > '2026' and not (now == 'x' or now in 'ab') %}"
        "Late{% elif now != '' %}{{ 'Early' if now else 'never' }}{% else %}-{% endif %}"
        "{{ ' at ' ~ now }}"
    )
    renderer.check_plain(source)
    assert (
        renderer.render_string(source, workspace_root="/w", now="2027")
        == "Work in /w.\nLate at 2027"
    )


@pytest.mark.parametrize(
    ("source", "said"),
    [
        ("{{ 'a' * 10**9 }}", "not arithmetic"),
        ("{{ 'x'.ljust(10**9) }}", "not a call"),
        ("{{ now.upper }}", "not an attribute"),
        ("{{ now[0] }}", "not an item or slice"),
        ("{{ now|center(9) }}", "not a filter"),
        ("{% for c in now %}{% endfor %}", "not a for loop"),
        ("{% set x = now %}", "not {% set %}"),
        ("{% include 'system.md.j2' %}", "not an include"),
        ("{% macro m() %}{% endmacro %}", "not a macro"),
        ("{{ [now, now] }}", "not a list"),
        ("{{ tree }}", "'tree' is not one of its variables (now, tools, workspace_root)"),
        ("{{ now }}" * MAX_TOKENS, f"over {MAX_TOKENS:,} tokens"),
        ("{{ " + "not " * 40 + "now }}", "nested over 32 levels"),
        ("{{now" + "<now" * MAX_NODES + "}}", f"over {MAX_NODES:,} parts"),
        ("{{" + "(" * 400 + "now" + ")" * 400 + "}}", "nested too deeply"),
        ("{% if now %}", "Unexpected end of template"),
    ],
)
def test_a_template_that_is_more_than_plain_is_refused_unrendered(source: str, said: str) -> None:
    with pytest.raises(jinja2.TemplateError, match=re.escape(said)):
        prompt_renderer().check_plain(source)


def test_a_rendered_role_past_its_limit_is_a_clear_error() -> None:
    role = "{{ workspace_root }}" * 100  # a short template, a long root
    with pytest.raises(jinja2.TemplateError, match="system prompt does not render: it renders to"):
        _render(role=role, workspace_root="/" + "w" * (MAX_ROLE_CHARS // 100))
    assert _render(role=role).count("/home/me/project") > 100
