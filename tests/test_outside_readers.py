"""What code outside the sandbox does with what a task wrote in the workspace (docs/protocol.md
§14), through the real server: a hostile file never stops it, never makes it read gigabytes,
and the data folder never lies where a task could write it."""

from __future__ import annotations

import ast
import json
import re
import sqlite3
import subprocess
import threading
from pathlib import Path

import pytest

from mcp_server import resources
from modules.mcp import config as mcp_config
from modules.tools import file_tools, focus, search_tools, sql_tool, sql_worker
from modules.tools.tool_context import ToolContext
from modules.undo import baseline, blob_store
from modules.undo.journal import UndoJournal
from modules.workspace import file_watcher, ignore, text_files
from modules.workspace.paths import Workspace
from tests.fake_llm import Call, FakeLLM, Reply
from tests.kit.clients import EventClient, connected
from tests.kit.server import REPO, ServerProcess, agent_argv, agent_env
from tests.kit.tools import call
from utils import setting_sources
from web import demo_sample

BACKTRACKING = "*a" * 25 + "b"  # with a free-backtracking regex: hours against a long name
LONG_NAME = "a" * 80
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.usefixtures("clean_fake"),
    pytest.mark.timeout(180),
    pytest.mark.server(
        files={".gitignore": BACKTRACKING + "\n*.log\n", LONG_NAME: "x", "app.log": "x"}
    ),
]
GROWN_MB = 900  # sparse: no disk, but the bytes a whole read would bring into memory
PEAK_GROWTH_MB = 300  # what reading a focused file may add to the server's peak memory, at most


def peak_mb(pid: int) -> float:
    """The process's peak resident memory so far (VmHWM), in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM line")


def test_a_backtracking_gitignore_leaves_the_tree_and_the_server_answering(
    server: ServerProcess, client: EventClient
) -> None:
    answer: dict = {}
    tree = threading.Thread(target=lambda: answer.update(client.call("get_file_tree", {}, 30)))
    tree.start()
    with connected(server.url) as other:  # while the tree is built, another client is served
        assert other.call("get_status", {}, 10)["ok"]
    tree.join(30)
    assert answer.get("ok"), answer
    shown = {child["path"] for child in answer["tree"]["children"]}
    assert LONG_NAME in shown and "app.log" not in shown  # the patterns still apply


def test_a_focused_file_grown_past_the_memory_is_read_in_part(
    server: ServerProcess, fake: FakeLLM, client: EventClient
) -> None:
    """The focused file's content goes with every model call; a command made it 900 MB."""
    (server.workspace / "notes.txt").write_text("head-marker\n" + "words " * 2000)
    grow = f"truncate -s {GROWN_MB}M notes.txt && printf tail-marker >> notes.txt"
    fake.script(
        Reply(tool_calls=[Call("focus_file", {"path": "notes.txt"})]),
        Reply(tool_calls=[Call("run_command", {"command": grow})]),
        Reply(content="done"),
    )
    assert server.pid is not None
    before = peak_mb(server.pid)
    cid = client.start("keep notes.txt in view")
    events = client.wait_done(cid, timeout=60)
    assert events[-1].payload["reason"] == "complete", events[-1].payload
    assert (server.workspace / "notes.txt").stat().st_size > GROWN_MB * 2**20
    growth = peak_mb(server.pid) - before
    assert growth < PEAK_GROWTH_MB, f"the server's peak memory grew by {growth:.0f} MB"
    sent = str(fake.chat_requests[-1].messages)
    assert "head-marker" in sent and "tail-marker" in sent and "bytes omitted" in sent


@pytest.mark.parametrize(
    "front",
    [["web", "--port", "1"], ["web", "--port", "1", "--async-mode", "eventlet"], ["cli"],
     ["cli", "-p", "hi"], ["mcp"]],
    ids=["web", "web-eventlet", "cli", "cli-p", "mcp"],
)  # fmt: skip
def test_the_data_folder_in_the_workspace_refuses_every_start(
    tmp_path: Path, fake: FakeLLM, front: list[str]
) -> None:
    """There a command could write DATA_DIR/mcp.json, whose servers start unsandboxed: every
    front (the A2A and MCP-over-HTTP servers start inside `web`) is refused before it starts
    anything, so nothing past the start need handle a data folder in the workspace."""
    workspace = tmp_path / "ws"
    (workspace / "data").mkdir(parents=True)
    touched = tmp_path / "server-ran"
    servers = {"x": {"command": "touch", "args": [str(touched)]}}
    (workspace / "data" / "mcp.json").write_text(json.dumps({"mcpServers": servers}))
    asked = len(fake.chat_requests)
    done = subprocess.run(
        agent_argv(front[0], workspace, workspace / "data", *front[1:]),
        env=agent_env(fake.base_url, fake.api_key, AGENT_A2A="true", AGENT_MCP_HTTP="true"),
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert "the data folder" in done.stderr and "lies in the workspace" in done.stderr
    assert "Workspace Agent:" not in done.stdout and not touched.exists()
    assert len(fake.chat_requests) == asked


def test_the_demo_start_reads_no_large_workspace_file(tmp_path: Path, fake: FakeLLM) -> None:
    """The demo's first start compares the workspace with its sample, file by file: a task's
    900 MB file (or a pipe) there was read whole (or waited on) before the server listened."""
    peaks = []
    for name, planted in (("empty", False), ("planted", True)):
        workspace = tmp_path / name / "ws"
        workspace.mkdir(parents=True)
        if planted:
            with (workspace / "big.bin").open("wb") as big:
                big.truncate(GROWN_MB * 2**20)
        demo = {"AGENT_PROVIDER": "demo", "AGENT_DEMO_PACE": "0"}
        process = ServerProcess(
            workspace,
            tmp_path / name / "data",
            base_url=fake.base_url,
            api_key=fake.api_key,
            env=demo,
        )
        with process:
            assert process.pid is not None
            peaks.append(peak_mb(process.pid))
    growth = peaks[1] - peaks[0]
    assert growth < PEAK_GROWTH_MB, f"the planted file added {growth:.0f} MB to the start's peak"


def test_the_workspaces_mcp_file_is_read_small_and_only_from_the_workspace(
    server: ServerProcess, client: EventClient, tmp_path: Path
) -> None:
    """The workspace's .mcp.json is read at every start and every change of the MCP servers,
    trusted or not: a task's 900 MB one was read whole each time (the bytes, then the text),
    and one linked out of the workspace lent the servers of the file it named."""
    planted = server.workspace / ".mcp.json"
    with planted.open("wb") as big:
        big.truncate(GROWN_MB * 2**20)
    assert server.pid is not None
    before = peak_mb(server.pid)
    try:
        added = client.call("mcp_add_server", {"name": "remote", "url": "http://127.0.0.1:9/"})
        assert added["ok"], added  # the change reads both files again
        [problem] = added["mcp"]["problems"]
        assert problem["path"] == str(planted) and "over 256 KB" in problem["message"]
        growth = peak_mb(server.pid) - before
        assert growth < PEAK_GROWTH_MB, f"the server's peak memory grew by {growth:.0f} MB"

        elsewhere = tmp_path / "elsewhere.json"
        elsewhere.write_text(json.dumps({"mcpServers": {"lent": {"command": "true"}}}))
        planted.unlink()
        planted.symlink_to(elsewhere)
        again = client.call("mcp_set_enabled", {"name": "remote", "enabled": False})
        assert again["ok"], again
        [problem] = again["mcp"]["problems"]
        assert "outside the workspace" in problem["message"], problem
        assert "lent" not in {s["name"] for s in again["mcp"]["servers"]}
    finally:
        planted.unlink()
        assert client.call("mcp_remove_server", {"name": "remote"})["ok"]


def test_a_database_query_made_to_hurt_runs_outside_the_server(
    server: ServerProcess, fake: FakeLLM, client: EventClient
) -> None:
    """sql_query opens a database a task may have written: SQLite ran in the server process,
    where one value of a planted view took 800 MB (and its repr four times that)."""
    with sqlite3.connect(server.workspace / "shop.db") as db:
        db.execute("CREATE VIEW totals AS SELECT zeroblob(400000000) AS total")
    fake.script(
        Reply(tool_calls=[Call("sql_query", {"path": "shop.db", "query": "SELECT * FROM totals"})]),
        Reply(content="done"),
    )
    assert server.pid is not None
    before = peak_mb(server.pid)
    cid = client.start("sum the sales")
    events = client.wait_done(cid, timeout=60)
    [result] = [e.payload for e in events if e.name == "tool" and e.payload["phase"] == "result"]
    assert not result["ok"] and "string or blob too big" in result["output"], result
    growth = peak_mb(server.pid) - before
    assert growth < PEAK_GROWTH_MB, f"the server's peak memory grew by {growth:.0f} MB"


def test_sparse_files_a_command_made_are_not_copied_for_undo(ctx: ToolContext, tmp_path: Path):
    """Undo copies what a command may change before it runs; 20 files of 40 MB made with
    `truncate` take 84 KB of the workspace's disk, and took 801 MB of the data folder's."""
    journal = UndoJournal(tmp_path / "data", ctx.workspace)
    make = "for i in $(seq 20); do truncate -s 40M f$i; printf $i >> f$i; done"
    for task, command in (("task-1", make), ("task-2", "rm f1")):
        ctx.journal = journal.task("conv-1", task)
        assert call(ctx, "run_command", command=command).ok  # the second snapshot meets them
        ctx.journal.finish()
    kept = sum(p.stat().st_blocks * 512 for p in (tmp_path / "data").rglob("*") if p.is_file())
    assert kept < 10 * 2**20, f"the data folder holds {kept / 2**20:.0f} MB"
    undone = journal.undo("conv-1")
    assert any("f1 is a sparse file" in line for line in undone.skipped), undone


def test_search_code_stops_by_itself_and_says_so(ctx: ToolContext):
    """A call given up on past the tool time limit went on walking in its thread, however large
    the workspace: the search now ends itself within half that limit."""
    (ctx.workspace.root / "a.txt").write_text("needle\n")
    assert call(ctx, "search_code", query="needle").output == "a.txt:1: needle"
    ctx.settings = ctx.settings.model_copy(update={"tool_timeout": 1e-6})
    result = call(ctx, "search_code", query="needle")
    assert result.ok and "stopped after" in result.output and "not every file" in result.output


def test_mcp_resources_walk_a_bounded_number_of_folders(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """resources/list counted only files: a workspace of a million empty folders was walked
    whole at every listing."""
    monkeypatch.setattr(resources, "MAX_LISTED", 50)
    workspace = Workspace(tmp_path / "ws")
    for n in range(51):
        (workspace.root / f"d{n:02}").mkdir(parents=True)
    (workspace.root / "d50" / "last.txt").write_text("x")
    (workspace.root / "d00" / "first.txt").write_text("x")
    listed = [r.uri for r in resources.WorkspaceResources(workspace).page(None).resources]
    assert listed == ["workspace:///d00/first.txt"]


# --- the inventory (docs/protocol.md §14) stays true to the code ---------------------------

SECTION = "## 14. What runs outside the sandbox"
# The workspace's access layer: a module that imports one of these and calls one of READS on
# what it reaches reads the workspace, from outside the sandbox.
ACCESS = {
    "modules.workspace.safe_fs",
    "modules.workspace.paths",
    "modules.workspace.ignore",
    "modules.workspace.file_tree",
    "modules.workspace.archive",
    "modules.workspace.text_files",
    "modules.undo.blob_store",
}
READS = {
    "open_regular",
    "read_bytes",
    "read_text",
    "list_dir",
    "parent_of",
    "readlink",
    "lstat",
    "scan",
    "scan_dir",
    "file_tree",
    "describe_tree",
    "zip_stream",
    "sha256_at",
    "store_at",
    "WorkspaceIgnore",
    "SafeRoot",
}
NOT_READERS = {
    "modules/workspace/safe_fs.py": "the walk itself, which every reader goes through",
    "modules/undo/manifests.py": "reads the undo journals in the data folder",
}
SKIPPED = {".venv", "tests", "node_modules", "bench", "scripts", "deploy", "static", "templates"}


def inventory() -> str:
    text = (REPO / "docs" / "protocol.md").read_text(encoding="utf-8")
    start = text.index(SECTION)
    end = text.find("\n## ", start + len(SECTION))
    return text[start : None if end == -1 else end]


def named_modules() -> set[str]:
    return set(re.findall(r"`([\w/]+\.py)`", inventory()))


def workspace_readers() -> set[str]:
    """The modules that read the workspace through its access layer."""
    found = set()
    for top in REPO.iterdir():
        if top.name in SKIPPED:  # not walked at all: .venv and node_modules are large
            continue
        for path in [top] if top.is_file() else top.rglob("*.py"):
            rel = path.relative_to(REPO)
            if path.suffix != ".py" or "site-packages" in rel.parts:
                continue
            text, module = path.read_text(encoding="utf-8"), ".".join(rel.with_suffix("").parts)
            if module not in ACCESS and not any(name in text for name in ACCESS):
                continue  # imports none of them (parsing every module took 13 s here)
            tree = ast.parse(text)
            imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
            called = {_called(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
            if (module in ACCESS or imported & ACCESS) and called & READS:
                found.add(rel.as_posix())
    return found


def _called(func: ast.expr) -> str | None:
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else None


def test_every_module_the_inventory_names_exists() -> None:
    named = named_modules()
    assert len(named) > 30
    assert not [m for m in named if not (REPO / m).is_file()]


def test_every_module_reading_the_workspace_has_a_row() -> None:
    readers = workspace_readers()
    assert {"modules/workspace/ignore.py", "modules/tools/focus.py", "web/routes.py"} <= readers
    missing = readers - named_modules() - NOT_READERS.keys()
    assert not missing, f"name these in docs/protocol.md §14, with what bounds them: {missing}"


@pytest.mark.parametrize(
    ("said", "holds"),
    [
        ("not over 32 KiB", ignore.MAX_GITIGNORE_BYTES == 32 * 1024),
        ("at most 2 s on `.gitignore` files", ignore.LISTING_SECONDS == 2),
        ("two windows of 80 KB", 4 * focus.FOCUS_CHARS_PER_FILE == 80_000),
        ("(512 MB, 12 s of CPU", sql_tool.MEMORY_BYTES == 512 * 2**20),
        ("the query stopped at 10 s)", sql_worker.QUERY_SECONDS == 10),
        ("values of at most 32 MB", sql_worker.MAX_VALUE_BYTES == 32 * 2**20),
        ("1,000,000 characters", sql_worker.MAX_OUTPUT_CHARS == 1_000_000),
        ("at most 20,000 files in at most 20,000 folders", resources.MAX_LISTED == 20_000),
        ("no file over 64 KB read", demo_sample.MAX_FILE_BYTES == 64 * 1024),
        ("regular files of at most 50 MB", blob_store.BLOB_LIMIT_BYTES == 50 * 2**20),
        ("`list_files` 500 entries", file_tools.LIST_LIMIT == 500),
        ("compare at most 1,000,000 pairs of lines", text_files.DIFF_PAIRS == 1_000_000),
        ("1 GB of address space; if it dies", file_watcher.MEMORY_BYTES == 2**30),
        ("the baseline child 2 GB of address space", baseline.BASELINE_MEMORY_BYTES == 2**31),
        ("of at most 256 KB (a larger one", setting_sources.SETTINGS_FILE_BYTES == 256 * 1024),
        ("a regular file of at most 256 KB (at", mcp_config.WORKSPACE_FILE_BYTES == 256 * 1024),
        ("files over 1 MB", search_tools.SEARCH_FILE_LIMIT_BYTES == 1_000_000),
    ],
)
def test_the_bounds_the_inventory_states_are_the_code_s(said: str, holds: bool) -> None:
    assert said in inventory()
    assert holds, f"the code no longer does what §14 says: {said!r}"
