"""Undo leaves alone what changed since the task: the user's later edits, deletions and files
made again, later tasks' changes; says so in the preview, the result and the CLI's /undo;
overwrites on request. A randomised history of tasks, commands and the user's own edits loses
no byte the user wrote."""

from __future__ import annotations

import io
import json
import random
from pathlib import Path
from typing import Any

import pytest

from cli.session import run_command
from cli.terminal import CliTerminal
from core.services import build_services
from modules.tools.tool_context import ToolContext
from modules.undo.conflicts import NOT_RECORDED
from modules.undo.journal import TaskJournal, UndoJournal
from tests.fake_llm import Call, FakeLLM, Reply
from tests.kit.settings import make_settings
from tests.kit.terminal import ask, make_terminal
from tests.kit.tools import call, journaled, make_ctx, state


@pytest.fixture
def ctx(ctx: ToolContext, tmp_path: Path) -> ToolContext:
    ctx.journal = UndoJournal(tmp_path / "data", ctx.workspace).task("conv-1", "task-1")
    (ctx.workspace.root / "shared.txt").write_text("before the task\n")
    (ctx.workspace.root / "other.txt").write_text("other before\n")
    return ctx


def task_of(ctx: ToolContext) -> TaskJournal:
    """The task's journal the fixture gave `ctx`."""
    assert ctx.journal is not None
    return ctx.journal


def journal_of(ctx: ToolContext) -> UndoJournal:
    return task_of(ctx)._owner


def ok(ctx: ToolContext, name: str, **arguments: Any) -> None:
    result = call(ctx, name, **arguments)
    assert result.ok, result.output


def test_the_users_later_edit_is_left_reported_and_overwritten_only_when_asked(
    ctx: ToolContext,
) -> None:
    root, journal = ctx.workspace.root, journal_of(ctx)
    ok(ctx, "modify_file", path="shared.txt", operation="append", content="by the task\n")
    ok(ctx, "modify_file", path="other.txt", operation="clear")
    task_of(ctx).finish()
    (root / "shared.txt").write_text("the user's own work\n")

    preview = journal.preview("conv-1")
    assert preview.files == [("other.txt", "restore")]
    assert [c.to_wire() for c in preview.conflicts] == [
        {"path": "shared.txt", "action": "restore", "reason": "changed since the task"}
    ]
    result = journal.undo("conv-1")
    assert (root / "shared.txt").read_text() == "the user's own work\n"
    assert (root / "other.txt").read_text() == "other before\n"
    assert result.restored == ["other.txt"] and result.skipped == []
    assert [c.path for c in result.conflicts] == ["shared.txt"]
    assert "1 changed since the task and were left as they are" in result.message

    assert journal.undoable("conv-1") == ["task-1"]  # what it left can still be undone
    again = journal.preview("conv-1")
    assert again.files == [] and [c.path for c in again.conflicts] == ["shared.txt"]
    forced = journal.undo("conv-1", overwrite=["shared.txt"])
    assert forced.restored == ["shared.txt"] and forced.conflicts == []
    assert (root / "shared.txt").read_text() == "before the task\n"
    assert journal.undoable("conv-1") == []


def test_deleted_made_again_and_mode_changes_are_conflicts(ctx: ToolContext) -> None:
    root, journal = ctx.workspace.root, journal_of(ctx)
    (root / "gone.txt").write_text("the task deletes me\n")
    (root / "mode.txt").write_text("x\n")
    ok(ctx, "modify_file", path="shared.txt", operation="append", content="task\n")
    ok(ctx, "delete_file", path="gone.txt")
    ok(ctx, "modify_file", path="mode.txt", operation="append", content="task\n")
    ok(ctx, "create_file", path="made/new.txt", content="task\n")
    task_of(ctx).finish()
    (root / "shared.txt").unlink()
    (root / "gone.txt").write_text("the user made it again\n")
    (root / "mode.txt").chmod(0o600)
    (root / "made/new.txt").write_text("the user rewrote it\n")

    result = journal.undo("conv-1")
    reasons = {c.path: c.reason for c in result.conflicts}
    assert reasons == {
        "shared.txt": "deleted since the task",
        "gone.txt": "made again since the task deleted it",
        "mode.txt": "changed since the task",
        "made/new.txt": "changed since the task",
    }
    assert not (root / "shared.txt").exists()
    assert (root / "gone.txt").read_text() == "the user made it again\n"
    assert (root / "mode.txt").stat().st_mode & 0o777 == 0o600
    assert (root / "made/new.txt").read_text() == "the user rewrote it\n"
    assert result.skipped == [
        "made: folder is not empty: it holds made/new.txt, changed since the task"
    ]

    journal.undo("conv-1", overwrite=True)  # the folder above a conflict is undone with it
    assert not (root / "made").exists()
    assert (root / "gone.txt").read_text() == "the task deletes me\n"
    assert (root / "shared.txt").read_text() == "before the task\n"


def test_a_later_tasks_change_is_a_conflict_that_names_it(ctx: ToolContext) -> None:
    root, journal = ctx.workspace.root, journal_of(ctx)
    ok(ctx, "run_command", command="echo first >> shared.txt")
    task_of(ctx).finish()
    ctx.journal = journal.task("conv-1", "task-2")
    ok(ctx, "run_command", command="echo second >> shared.txt")
    ctx.journal.finish()

    [conflict] = journal.preview("conv-1", "task-1").conflicts
    assert conflict.to_wire() == {
        "path": "shared.txt",
        "action": "restore",
        "reason": "changed by a later task",
        "later_message_id": "task-2",
    }
    assert journal.undo("conv-1", "task-2").restored == ["shared.txt"]
    assert journal.preview("conv-1", "task-1").conflicts == []  # as task-1 left it again
    assert journal.undo("conv-1", "task-1").restored == ["shared.txt"]
    assert (root / "shared.txt").read_text() == "before the task\n"


def test_a_task_that_never_ended_leaves_everything_to_the_user(ctx: ToolContext) -> None:
    root, journal = ctx.workspace.root, journal_of(ctx)
    ok(ctx, "modify_file", path="shared.txt", operation="clear")  # and the process stopped
    result = journal.undo("conv-1")
    assert [(c.path, c.reason) for c in result.conflicts] == [("shared.txt", NOT_RECORDED)]
    assert (root / "shared.txt").read_text() == ""
    assert journal.undo("conv-1", overwrite=True).restored == ["shared.txt"]


def test_the_after_state_is_hashes_not_copies(ctx: ToolContext, tmp_path: Path) -> None:
    blobs = tmp_path / "data/undo/blobs"
    ok(ctx, "create_file", path="shared.txt", content="new content\n")
    kept = sorted(blobs.rglob("*"))
    task_of(ctx).finish()
    assert sorted(blobs.rglob("*")) == kept
    [manifest] = (tmp_path / "data/undo/tasks/conv-1").iterdir()
    after = json.loads(manifest.read_text())["after"]
    assert after["shared.txt"]["kind"] == "file" and len(after["shared.txt"]["sha256"]) == 64


def test_an_edit_applied_after_its_task_ended_is_what_undo_compares_with(
    tmp_path: Path,
) -> None:
    ctx = journaled(make_ctx(tmp_path))
    assert ctx.proposals is not None and ctx.journal is not None
    root = ctx.workspace.root
    (root / "a.py").write_text("a = 1\n")
    ok(ctx, "propose_edit", path="a.py", new_content="a = 2\n")
    ctx.journal.finish()  # the task ends with the edit pending
    [proposal] = ctx.proposals.pending("conv-1")
    ctx.proposals.apply_proposal(proposal.id)
    journal = ctx.proposals.journal
    assert journal.preview("conv-1").conflicts == []
    (root / "a.py").write_text("a = 3  # the user's\n")
    assert [c.path for c in journal.undo("conv-1").conflicts] == ["a.py"]
    assert (root / "a.py").read_text() == "a = 3  # the user's\n"


def test_cli_undo_command(fake_llm: FakeLLM, tmp_path: Path) -> None:
    settings = make_settings(fake_llm, tmp_path)
    out, err = io.StringIO(), io.StringIO()
    answers = io.StringIO("n\ny\n")  # /undo asks first, listing what it will do
    terminal = CliTerminal(build_services(settings), out=out, err=err, stdin=answers)
    fake_llm.script(
        Reply(tool_calls=[Call("create_file", {"path": "hello.txt", "content": "hi"})]),
        Reply(content="ok"),
    )
    assert terminal.run_foreground("make hello") == "complete"
    assert (tmp_path / "ws/hello.txt").exists()
    out.truncate(0)
    assert run_command(terminal, "/undo")
    assert "remove  hello.txt" in out.getvalue() and "cancelled" in out.getvalue()
    assert (tmp_path / "ws/hello.txt").exists()
    out.truncate(0)
    out.seek(0)
    assert run_command(terminal, "/undo")
    assert "removed  hello.txt" in out.getvalue()
    assert not (tmp_path / "ws/hello.txt").exists()


def test_cli_undo_says_what_it_kept_and_how_to_overwrite(fake_llm: FakeLLM, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "shared.txt").write_text("before\n")
    out, answers = io.StringIO(), io.StringIO("y\ny\n")
    services = build_services(make_settings(fake_llm, tmp_path))
    terminal = CliTerminal(services, out=out, err=io.StringIO(), stdin=answers)
    fake_llm.script(
        Reply(
            tool_calls=[
                Call("create_file", {"path": "shared.txt", "content": "the task's\n"}),
                Call("create_file", {"path": "notes.txt", "content": "made\n"}),
            ]
        ),
        Reply(content="ok"),
    )
    assert terminal.run_foreground("change them") == "complete"
    assert terminal.conversation is not None
    task_id = terminal.conversation.path()[0]["id"]
    (ws / "shared.txt").write_text("the user's\n")

    out.seek(0)
    out.truncate()
    assert run_command(terminal, "/undo")
    said = out.getvalue()
    assert "remove  notes.txt" in said
    assert "and leave as they are:\n  keep     shared.txt: changed since the task" in said
    assert "  kept     shared.txt: changed since the task" in said
    assert f"/undo {task_id} --overwrite" in said
    assert (ws / "shared.txt").read_text() == "the user's\n" and not (ws / "notes.txt").exists()

    out.seek(0)
    out.truncate()
    assert run_command(terminal, f"/undo {task_id} --overwrite")
    said = out.getvalue()
    assert "restore shared.txt (overwriting: changed since the task)" in said
    assert "restored shared.txt" in said and "--overwrite" not in said.split("Undo it?")[1]
    assert (ws / "shared.txt").read_text() == "before\n"


# --- a randomised history --------------------------------------------------------------------

PATHS = ["a.txt", "b.txt", "c.txt", "sub/d.txt", "sub/e.txt", "deep/f/g.txt"]


def task_calls(rng: random.Random, step: int) -> list[Call]:
    """One to three changes a task makes: through the file tools or commands."""
    calls = []
    for n in range(rng.randint(1, 3)):
        path, other = rng.sample(PATHS, 2)
        text = f"task {step}.{n}\n"
        calls.append(
            rng.choice(
                [
                    Call("create_file", {"path": path, "content": text}),
                    Call("modify_file", {"path": path, "operation": "append", "content": text}),
                    Call("delete_file", {"path": path}),
                    Call("rename_file", {"old_path": path, "new_path": other}),
                    Call("run_command", {"command": f"mkdir -p sub && printf '{text}' > {path}"}),
                    Call("run_command", {"command": f"printf '{text}' >> {path} || true"}),
                    Call("run_command", {"command": f"rm -f {path}"}),
                    Call("run_command", {"command": f"mv -f {path} {other} 2>/dev/null || true"}),
                ]
            )
        )
    return calls


def user_edit(rng: random.Random, root: Path, step: int, wrote: dict[str, bytes]) -> None:
    """The user writes (or deletes) a file between tasks, and remembers what they wrote."""
    path = rng.choice(PATHS)
    target = root / path
    if rng.random() < 0.25 and target.is_file():
        target.unlink()
        wrote.pop(path, None)
        return
    content = f"the user's edit {step}: {rng.random()}\n".encode()
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(content)
    wrote[path] = content


def files(root: Path) -> dict[str, Any]:
    return {rel: found for rel, found in state(root).items() if found[0] == "file"}


@pytest.mark.parametrize("seed", range(10))
def test_undo_never_loses_a_byte_the_user_wrote(
    fake_llm: FakeLLM, tmp_path: Path, seed: int
) -> None:
    rng = random.Random(seed)
    terminal = make_terminal(fake_llm, tmp_path)
    root = terminal.services.workspace.root
    for path in PATHS[:3]:
        (root / path).write_text(f"{path} at the start\n")
    wrote: dict[str, bytes] = {}  # path -> what the user wrote there last
    tasks: list[str] = []
    for step in range(10):
        if step and rng.random() < 0.6:
            user_edit(rng, root, step, wrote)
        before = files(root)
        fake_llm.script(Reply(tool_calls=task_calls(rng, step)), Reply(content="done"))
        assert ask(terminal, f"task {step}") == "complete"
        assert terminal.conversation is not None
        tasks.append([r for r in terminal.conversation.path() if r["role"] == "user"][-1]["id"])
        after = files(root)
        for path in set(before) | set(after):
            if before.get(path) != after.get(path):
                wrote.pop(path, None)  # the task wrote there last
    newest = terminal.undo(tasks[-1])  # nothing changed since it: undone exactly
    assert newest.conflicts == [] and files(root) == before
    for task in rng.sample(tasks[:-1], len(tasks) - 1):
        terminal.undo(task)
        found = files(root)
        for path, content in wrote.items():
            assert found.get(path, (None,))[-1] == content, (seed, task, path)
