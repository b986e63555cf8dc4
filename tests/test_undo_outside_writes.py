"""A person's save while a task's command runs (the page's editor) is theirs, not the command's:
undoing the task leaves it, unless the command wrote the file again after them."""

from __future__ import annotations

from pathlib import Path

import pytest

from modules.tools.tool_context import ToolContext
from modules.undo.journal import TaskJournal, UndoJournal


@pytest.fixture
def task(ctx: ToolContext, tmp_path: Path) -> TaskJournal:
    (ctx.workspace.root / "notes.txt").write_text("before\n")
    return UndoJournal(tmp_path / "data", ctx.workspace).task("conv-1", "task-1")


def command_runs(task: TaskJournal, root: Path, during: list[tuple[str, str, bool]]) -> list[str]:
    """A command between two snapshots, writing `during` (path, text, by a person?) meanwhile."""
    snapshot = task.snapshot()
    for rel, text, by_person in during:
        (root / rel).write_text(text)
        if by_person:
            task._owner.outside_write(rel)
    changed = task.record_changes_since(snapshot)
    task.finish()
    return changed


def test_a_save_during_a_command_is_not_the_commands_and_undo_leaves_it(
    ctx: ToolContext, task: TaskJournal
) -> None:
    root = ctx.workspace.root
    during = [("made.txt", "by the command\n", False), ("notes.txt", "the person's\n", True)]
    assert command_runs(task, root, during) == ["made.txt"]
    result = task._owner.undo("conv-1")
    assert result.removed == ["made.txt"] and not (root / "made.txt").exists()
    assert (root / "notes.txt").read_text() == "the person's\n"


def test_a_file_the_command_wrote_after_the_save_is_the_commands(
    ctx: ToolContext, task: TaskJournal
) -> None:
    root = ctx.workspace.root
    during = [("notes.txt", "the person's\n", True), ("notes.txt", "the command's\n", False)]
    assert command_runs(task, root, during) == ["notes.txt"]
    task._owner.undo("conv-1")
    assert (root / "notes.txt").read_text() == "before\n"


def test_without_the_note_the_save_counts_as_the_commands(
    ctx: ToolContext, task: TaskJournal
) -> None:
    root = ctx.workspace.root  # what the note prevents: the undo puts the save back
    assert command_runs(task, root, [("notes.txt", "the person's\n", False)]) == ["notes.txt"]
    task._owner.undo("conv-1")
    assert (root / "notes.txt").read_text() == "before\n"


def test_a_save_of_the_configuration_during_a_command_is_not_held_as_the_commands(
    ctx: ToolContext, task: TaskJournal
) -> None:
    root, journal = ctx.workspace.root, task._owner
    (root / ".mcp.json").write_text("{}\n")
    held = journal.keep_paths([".mcp.json"])  # as the hold of a command's config changes does
    (root / ".mcp.json").write_text('{"mcpServers": {}}\n')
    assert journal.changed_paths(held, [".mcp.json"]) == [".mcp.json"]
    journal.outside_write(".mcp.json")
    assert journal.changed_paths(held, [".mcp.json"]) == []
    journal.release(held)
