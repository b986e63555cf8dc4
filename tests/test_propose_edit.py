"""propose_edit: a diff and nothing written; apply, conflicts, discard, undo of an apply."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from core.approval import ApprovalGate
from modules.tools.catalogue import build_registry
from modules.tools.proposals import ProposalError, ProposalStore, replace_lines
from modules.tools.tool_context import ToolContext
from modules.workspace.text_files import unified_diff
from protocol.event_values import FileChange
from tests.kit.tools import call, journaled, state

TEXT = "alpha\nbeta\ngamma\ndelta\n"


@pytest.fixture
def ctx(ctx: ToolContext) -> ToolContext:
    journaled(ctx)
    (ctx.workspace.root / "notes.txt").write_text(TEXT)
    return ctx


def propose(ctx: ToolContext, **arguments: Any) -> tuple[str, str]:
    """(proposal id, diff) of a successful propose_edit call."""
    result = call(ctx, "propose_edit", **arguments)
    assert result.ok, result.output
    head, _, diff = result.output.partition("\n")
    return head.split()[1], diff


def test_whole_file_proposal_is_a_diff_and_writes_nothing(ctx: ToolContext) -> None:
    before = state(ctx.workspace.root)
    pid, diff = propose(ctx, path="notes.txt", new_content="alpha\nBETA\ngamma\ndelta\n")
    assert diff == (
        "--- a/notes.txt\n+++ b/notes.txt\n@@ -1,4 +1,4 @@\n alpha\n-beta\n+BETA\n gamma\n delta\n"
    )
    assert state(ctx.workspace.root) == before
    assert ctx.proposals is not None
    proposal = ctx.proposals.get(pid)
    assert proposal is not None and proposal.diff == diff


def test_line_range_proposal(ctx: ToolContext) -> None:
    _, diff = propose(ctx, path="notes.txt", new_content="B\nC", start_line=2, end_line=3)
    assert diff.endswith("-beta\n-gamma\n+B\n+C\n delta\n")
    _, diff = propose(ctx, path="notes.txt", new_content="inserted", start_line=2, end_line=1)
    assert "+inserted\n beta\n" in diff and "-" not in diff.split("@@")[-1]
    _, diff = propose(ctx, path="notes.txt", new_content="LAST", start_line=4)
    assert diff.endswith(" gamma\n-delta\n+LAST\n")


def test_new_file_and_missing_newline(ctx: ToolContext) -> None:
    _, diff = propose(ctx, path="new/file.py", new_content="x = 1\ny = 2")
    assert diff == (
        "--- /dev/null\n+++ b/new/file.py\n@@ -0,0 +1,2 @@\n+x = 1\n+y = 2\n"
        "\\ No newline at end of file\n"
    )
    assert not (ctx.workspace.root / "new").exists()


def test_bad_proposals_are_explained(ctx: ToolContext) -> None:
    cases: list[tuple[dict[str, Any], str]] = [
        ({"path": "notes.txt", "new_content": "x", "start_line": 9}, "past the end"),
        ({"path": "notes.txt", "new_content": "x", "start_line": 2, "end_line": 9}, "end_line 9"),
        ({"path": "nope.txt", "new_content": "x", "start_line": 1}, "does not exist yet"),
        ({"path": "notes.txt", "new_content": TEXT}, "already holds"),
        ({"path": "../out.txt", "new_content": "x"}, "outside the workspace"),
    ]
    for arguments, expected in cases:
        result = call(ctx, "propose_edit", **arguments)
        assert not result.ok and expected in result.output, result.output
    ctx.proposals = None
    assert "not available" in call(ctx, "propose_edit", path="a", new_content="b").output


def test_apply_writes_atomically_and_is_undoable(ctx: ToolContext, tmp_path: Path) -> None:
    root = ctx.workspace.root
    assert ctx.proposals is not None
    (root / "notes.txt").chmod(0o640)
    before = state(root)
    pid, _ = propose(ctx, path="notes.txt", new_content="B", start_line=2)
    new_pid, _ = propose(ctx, path="docs/new.md", new_content="# New\n")
    store = ProposalStore(tmp_path / "data", ctx.workspace, ctx.proposals.journal)  # a restart
    assert [p.id for p in store.pending("conv-1")] == [pid, new_pid]
    assert store.apply_proposal(pid) == FileChange("modified", "notes.txt")
    assert (root / "notes.txt").read_text() == "alpha\nB\ngamma\ndelta\n"
    assert ((root / "notes.txt").stat().st_mode & 0o777) == 0o640
    assert store.apply_proposal(new_pid) == FileChange("created", "docs/new.md")
    assert store.pending("conv-1") == []
    with pytest.raises(ProposalError) as gone:
        store.apply_proposal(pid)
    assert gone.value.code == "not_found"
    result = store.journal.undo("conv-1", "task-1")
    assert set(result.restored) == {"notes.txt", "docs", "docs/new.md"}
    assert state(root) == before


def test_apply_after_an_outside_change_is_refused(ctx: ToolContext) -> None:
    root = ctx.workspace.root
    assert ctx.proposals is not None
    pid, _ = propose(ctx, path="notes.txt", new_content="mine")
    (root / "notes.txt").write_text("the user edited it\n")
    with pytest.raises(ProposalError) as refused:
        ctx.proposals.apply_proposal(pid)
    assert refused.value.code == "conflict" and "changed since" in str(refused.value)
    assert (root / "notes.txt").read_text() == "the user edited it\n"
    new_pid, _ = propose(ctx, path="late.txt", new_content="x")
    (root / "late.txt").write_text("someone was first")
    with pytest.raises(ProposalError, match="changed since"):
        ctx.proposals.apply_proposal(new_pid)


def test_discard(ctx: ToolContext) -> None:
    pid, _ = propose(ctx, path="notes.txt", new_content="gone")
    assert ctx.proposals is not None
    ctx.proposals.discard_proposal(pid)
    assert ctx.proposals.get(pid) is None
    with pytest.raises(ProposalError) as again:
        ctx.proposals.discard_proposal(pid)
    assert again.value.code == "not_found"
    assert (ctx.workspace.root / "notes.txt").read_text() == TEXT


def test_apply_without_a_task_has_a_journal_of_its_own(ctx: ToolContext) -> None:
    ctx.journal = None
    pid, _ = propose(ctx, path="notes.txt", new_content="solo\n")
    assert ctx.proposals is not None
    ctx.proposals.apply_proposal(pid)
    assert ctx.proposals.journal.undoable("conv-1") == [f"proposal-{pid}"]
    ctx.proposals.journal.undo("conv-1")
    assert (ctx.workspace.root / "notes.txt").read_text() == TEXT


def test_ask_mode_does_not_ask_for_a_proposal(ctx: ToolContext) -> None:
    tool = build_registry().get("propose_edit")
    assert tool is not None and tool.asks == "never"
    assert not ApprovalGate().needs_approval("ask", tool, None)


def test_helpers() -> None:
    assert replace_lines("a\nb", "X", 3, 2, "f") == "a\nb\nX"
    assert replace_lines("a\nb\n", "", 1, 1, "f") == "b\n"
    assert replace_lines("", "new", None, None, "f") == "new"
    assert unified_diff("same\n", "same\n", "f") == ""
    assert unified_diff("x\n", None, "f").startswith("--- a/f\n+++ /dev/null\n")
