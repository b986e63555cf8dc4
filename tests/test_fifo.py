"""A named pipe in the workspace: every tool answers at once and never opens it to read."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any

import pytest

from modules.results import ToolError
from modules.tools.tool_context import ToolContext
from tests.kit.clients import Web
from tests.kit.settings import TOKEN
from tests.kit.tools import call, journaled

pytestmark = pytest.mark.timeout(60)
PROMPT_SECONDS = 10


def prompt(work: Callable[[], Any]) -> Any:
    """Run `work` in a thread; fail (instead of hanging the suite) if it blocks."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = work()
        except BaseException as exc:  # re-raised in the test's thread
            box["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(PROMPT_SECONDS)
    if thread.is_alive():
        pytest.fail("the call blocked on the named pipe")
    if "error" in box:
        raise box["error"]
    return box.get("value")


@pytest.fixture
def ctx(ctx: ToolContext) -> ToolContext:
    journaled(ctx)
    os.mkfifo(ctx.workspace.root / "pipe1")
    (ctx.workspace.root / "plain.txt").write_text("needle here\n")
    return ctx


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("read_file", {"path": "pipe1"}),
        ("modify_file", {"path": "pipe1", "operation": "append", "content": "x"}),
        ("modify_file", {"path": "pipe1", "operation": "clear"}),
        ("create_file", {"path": "pipe1", "content": "x"}),
        ("propose_edit", {"path": "pipe1", "new_content": "x"}),
    ],
)
def test_file_tools_refuse_a_named_pipe(ctx: ToolContext, name: str, arguments: dict) -> None:
    result = prompt(lambda: call(ctx, name, **arguments))
    assert not result.ok
    assert "pipe1 is a named pipe, not a regular file" in result.output, result.output
    assert (ctx.workspace.root / "pipe1").is_fifo()


def test_focus_file_refuses_and_contents_skip_a_pipe(ctx: ToolContext) -> None:
    result = prompt(lambda: call(ctx, "focus_file", path="pipe1"))
    assert not result.ok and "not an existing file" in result.output
    (ctx.workspace.root / "later").write_text("text")
    assert call(ctx, "focus_file", path="later").ok
    (ctx.workspace.root / "later").unlink()
    os.mkfifo(ctx.workspace.root / "later")  # the focused file became a pipe
    assert prompt(lambda: ctx.focus.contents(ctx.workspace)) == []
    assert ctx.focus.paths() == []


def test_search_and_listing_skip_a_pipe(ctx: ToolContext) -> None:
    result = prompt(lambda: call(ctx, "search_code", query="needle"))
    assert result.ok and result.output == "plain.txt:1: needle here"
    listing = prompt(lambda: call(ctx, "list_files"))
    assert listing.ok and "pipe1" in listing.output


def test_undo_snapshot_and_keep_never_open_a_pipe(ctx: ToolContext) -> None:
    journal, proposals = ctx.journal, ctx.proposals
    assert journal is not None and proposals is not None
    snap = prompt(journal.snapshot)
    assert "pipe1" not in snap.stats
    (ctx.workspace.root / "plain.txt").write_text("changed\n")
    assert prompt(lambda: journal.record_changes_since(snap)) == ["plain.txt"]
    prompt(lambda: journal.before_change(ctx.workspace.root / "pipe1"))
    assert call(ctx, "delete_file", path="pipe1").ok
    prompt(journal.finish)  # never opens the pipe either
    result = prompt(lambda: proposals.journal.undo("conv-1", "task-1"))
    assert (ctx.workspace.root / "plain.txt").read_text() == "needle here\n"
    assert any(s.startswith("pipe1: not kept") for s in result.skipped), result.skipped


def test_workspace_reads_refuse_a_pipe(ctx: ToolContext) -> None:
    workspace = ctx.workspace
    assert prompt(lambda: workspace.lstat("pipe1")) is not None
    with pytest.raises(ToolError, match="pipe1 is a named pipe, not a regular file"):
        prompt(lambda: workspace.read_bytes("pipe1", 10))


def test_http_preview_of_a_pipe_is_not_found(web: Web) -> None:
    os.mkfifo(web.workspace / "pipe1")
    headers = {"Authorization": f"Bearer {TOKEN}"}
    query = {"path": "pipe1"}
    response = prompt(lambda: web.http().get("/api/file", query_string=query, headers=headers))
    assert response.status_code == 404
    assert response.json["error"]["code"] == "not_found"
