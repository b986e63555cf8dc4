"""The page's table of tools (static/js/tools.js) says of each tool what the server's tools are.

The page decides how a call's card behaves from that one table: which tools run code (a clock
while they run, the code in their approval), which change files (Undo offered at the task's
end), which delete, which are a plan's own (make_plan, finish_step) and which hand work to a
sub-agent (`delegate_to_NAME`), and how argument keys show. The table is read by importing the
module in Node, the server's side from its registry (modules/tools/catalogue.py) and
core/modes.py: a tool renamed, added or changed on one side and not the other fails here.
"""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from core import modes
from core.agent_specs import AgentSpec
from modules.tools import file_tools
from modules.tools.catalogue import build_registry
from modules.tools.registry import Tool

ROOT = Path(__file__).resolve().parent.parent
TOOLS_MODULE = ROOT / "static" / "js" / "tools.js"
NODE = shutil.which("node")

pytestmark = pytest.mark.skipif(
    NODE is None, reason="node is not installed: tools.js is read by importing it"
)

DUMP = """
const tools = await import(process.argv[1]);
console.log(JSON.stringify({
  kinds: tools.TOOL_KINDS, prefix: tools.DELEGATE_PREFIX, summary: tools.SUMMARY_KEYS,
  paths: tools.PATH_KEYS, text: tools.TEXT_KEYS, code: tools.CODE_LANGUAGES,
}));
"""


@pytest.fixture(scope="module")
def page() -> dict[str, Any]:
    """What tools.js exports, as Node imports it."""
    assert NODE is not None
    done = subprocess.run(
        [NODE, "--input-type=module", "-e", DUMP, TOOLS_MODULE.as_uri()],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    table: dict[str, Any] = json.loads(done.stdout)
    return table


@pytest.fixture(scope="module")
def server_tools() -> dict[str, Tool]:
    return {tool.name: tool for tool in build_registry().tools()}


def kinds_with(page: dict[str, Any], trait: str) -> set[str]:
    return {name for name, kind in page["kinds"].items() if kind.get(trait)}


def own_tool_names() -> set[str]:
    """The names core/modes.py gives the tools a task makes for itself (`own_tool("NAME", ...)`)."""
    tree = ast.parse(Path(modes.__file__).read_text(encoding="utf-8"))
    return {
        node.args[0].value
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and getattr(node.func, "id", None) == "own_tool"
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    }


def test_the_commands_are_the_tools_that_run_code(
    page: dict[str, Any], server_tools: dict[str, Tool]
) -> None:
    running = {name for name, tool in server_tools.items() if tool.runs_code}
    assert kinds_with(page, "runs") == running
    for name in running:
        argument = page["kinds"][name]["runs"]["argument"]
        assert argument in server_tools[name].args_model.model_fields, (name, argument)
    assert page["code"] == {
        page["kinds"][name]["runs"]["argument"]: page["kinds"][name]["runs"]["language"]
        for name in running
    }


def test_the_tools_that_change_files_are_the_servers(
    page: dict[str, Any], server_tools: dict[str, Tool]
) -> None:
    changing = {name for name, tool in server_tools.items() if tool.targets is not None}
    assert kinds_with(page, "changesFiles") == changing
    deleting = {
        name for name, tool in server_tools.items() if tool.targets is file_tools.removed_path
    }
    assert deleting == {"delete_file"}
    assert kinds_with(page, "deletes") == deleting


def test_plan_tools_and_delegation_are_named_as_the_server_names_them(page: dict[str, Any]) -> None:
    assert kinds_with(page, "plan") == own_tool_names() == {"make_plan", "finish_step"}
    coder = AgentSpec(name="coder", description="Writes code.")
    delegation = modes.delegation_tool(coder, None, None)  # type: ignore[arg-type]
    assert delegation.name == page["prefix"] + "coder"


def test_every_key_the_page_shows_apart_is_an_argument_of_a_tool(
    page: dict[str, Any], server_tools: dict[str, Tool]
) -> None:
    models = [tool.args_model for tool in server_tools.values()]
    models += [modes.DelegateArgs, modes.MakePlanArgs, modes.FinishStepArgs]
    arguments = {field for model in models for field in model.model_fields}
    keys = {*page["summary"], *page["paths"], *page["text"], *page["code"]}
    assert keys - arguments == set()
