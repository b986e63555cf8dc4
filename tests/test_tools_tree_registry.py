"""The workspace tree (get_file_tree, system prompt) and the tool registry."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest

from modules.tools.catalogue import build_registry
from modules.tools.tool_context import ToolContext
from modules.workspace.file_tree import describe_tree, file_tree
from modules.workspace.ignore import WorkspaceIgnore
from tests.kit.tools import call, make_ctx

PROTOCOL_TOOLS = {
    "create_file": {"path", "content", "annotation"},
    "create_folder": {"path"},
    "read_file": {"path", "start_line", "end_line"},
    "modify_file": {"path", "operation", "content", "old_text", "new_text"},
    "delete_file": {"path"},
    "rename_file": {"old_path", "new_path"},
    "propose_edit": {"path", "new_content", "start_line", "end_line"},
    "list_files": {"directory", "pattern"},
    "search_code": {"query", "max_results"},
    "run_python": {"code", "timeout"},
    "run_command": {"command", "timeout", "background"},
    "web_search": {"query", "max_results"},
    "focus_file": {"path"},
    "unfocus_file": {"path"},
    "update_memory": {"scope", "operation", "content"},
    # added to docs/protocol.md §6 later: the data agent's SQL, and skills
    "sql_query": {"path", "query", "max_rows"},
    "use_skill": {"name"},
    "read_skill_file": {"name", "path"},
    "read_document": {"path", "offset"},
    # background processes (issue 35)
    "process_output": {"process_id", "offset", "wait_seconds", "pattern"},
    "process_input": {"process_id", "text", "eof"},
    "process_stop": {"process_id", "signal"},
    "process_list": set(),
}
READ_ONLY = {
    "read_file",
    "list_files",
    "search_code",
    "web_search",
    "focus_file",
    "unfocus_file",
    "sql_query",
    "use_skill",
    "read_skill_file",
    "read_document",
    "process_output",
    "process_list",
}


def _populate(ctx: ToolContext) -> None:
    root = ctx.workspace.root
    for rel in (
        "src/pkg/mod.py",
        "src/main.py",
        "README.md",
        "Zeta.txt",
        "alpha.txt",
        ".git/HEAD",
        "src/__pycache__/x.pyc",
        "src/.main.py.swp",
        "notes.txt~",
        ".#lock",
        "4913",
        ".env",
    ):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("")
    (root / "link").symlink_to("src")


def test_file_tree_shape_order_and_ignores(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    _populate(ctx)
    ctx.annotations.set("src/main.py", "entry point")
    ctx.annotations.set("deleted.py", "stale")
    tree = file_tree(ctx.workspace, ctx.annotations)
    assert (tree["name"], tree["path"], tree["is_dir"]) == ("ws", "", True)
    assert "truncated" not in tree
    names = [c["name"] for c in tree["children"]]
    assert names == ["src", ".env", "alpha.txt", "link", "README.md", "Zeta.txt"]
    src = tree["children"][0]
    assert [c["path"] for c in src["children"]] == ["src/pkg", "src/main.py"]
    assert src["children"][1]["annotation"] == "entry point"
    assert src["children"][0]["children"][0] == {
        "name": "mod.py",
        "path": "src/pkg/mod.py",
        "is_dir": False,
    }
    assert tree["children"][3] == {"name": "link", "path": "link", "is_dir": False}
    assert ctx.annotations.all() == {"src/main.py": "entry point"}
    json.dumps(tree)


def test_file_tree_truncates_breadth_first(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    _populate(ctx)
    tree = file_tree(ctx.workspace, ctx.annotations, max_entries=7)
    assert tree["truncated"] is True
    assert len(tree["children"]) == 6
    assert [c["name"] for c in tree["children"][0]["children"]] == ["pkg"]


def test_describe_tree(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    assert describe_tree(ctx.workspace, ctx.annotations) == "(the workspace is empty)"
    _populate(ctx)
    ctx.annotations.set("src/main.py", "entry point")
    text = describe_tree(ctx.workspace, ctx.annotations)
    assert text.splitlines()[:4] == ["src/", "  pkg/", "    mod.py", "  main.py  — entry point"]
    cut = describe_tree(ctx.workspace, ctx.annotations, max_entries=3)
    assert cut.splitlines()[-1].startswith("… (listing cut at 3 entries")


def test_file_tree_lists_20000_files_and_caps_by_default(tmp_path: Path) -> None:
    # tmpfs when there is one: creating 20,000 files on a busy disk can take longer than the test.
    shm = Path("/dev/shm")
    with tempfile.TemporaryDirectory(dir=shm if shm.is_dir() else tmp_path) as base:
        ctx = make_ctx(Path(base))
        root = ctx.workspace.root
        for d in range(100):
            folder = root / f"dir{d:03}"
            folder.mkdir()
            for f in range(200):
                os.close(os.open(folder / f"file{f:03}.py", os.O_CREAT | os.O_WRONLY))
        tree = file_tree(ctx.workspace, ctx.annotations, max_entries=50_000)
        assert sum(len(c["children"]) for c in tree["children"]) == 20_000
        assert file_tree(ctx.workspace, ctx.annotations)["truncated"]


def test_registry_matches_protocol(tmp_path: Path) -> None:
    registry = build_registry()
    assert set(registry.names()) == set(PROTOCOL_TOOLS)
    for schema in registry.schemas():
        function = schema["function"]
        assert set(function["parameters"]["properties"]) == PROTOCOL_TOOLS[function["name"]]
        assert function["description"]
        for prop in function["parameters"]["properties"].values():
            assert prop.get("description"), function["name"]
    read_only = {s["function"]["name"] for s in registry.schemas(read_only=True)}
    assert read_only == READ_ONLY


@pytest.mark.parametrize(
    ("relative", "hidden"),
    [
        ("notes/.plan.md.1a2b3c4d.tmp", True),
        (".git/index", True),
        ("src/__pycache__/m.pyc", True),
        ("src/.main.py.swp", True),
        ("src/main.py~", True),
        (".#draft.md", True),
        ("4913", True),
        ("data.tmp", False),
        ("node_modules/left-pad/index.js", True),
        ("src/main.py", False),
        (".env.example", False),
    ],
)
def test_the_live_tree_ignores_exactly_what_the_listing_hides(
    relative: str, hidden: bool, tmp_path: Path
):
    ctx = make_ctx(tmp_path)
    (ctx.workspace.root / relative).parent.mkdir(parents=True, exist_ok=True)
    (ctx.workspace.root / relative).write_text("")
    assert WorkspaceIgnore(ctx.workspace.root).hides(relative, is_dir=False) is hidden
    assert (relative in call(ctx, "list_files").output.splitlines()) is not hidden
