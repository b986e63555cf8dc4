"""Undo on real files: tool changes, command changes, user edits left alone, the agent loop."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from core.main_terminal import TaskBusy
from modules.tools.tool_context import ToolContext
from modules.undo.baseline import BASELINE_MEMORY_BYTES
from modules.undo.journal import UndoJournal
from modules.workspace.paths import Workspace
from tests.fake_llm import Call, FakeLLM, Reply
from tests.kit.server import REPO
from tests.kit.terminal import ask, make_terminal, run_in_thread
from tests.kit.tools import call, make_ctx, state

BINARY = bytes(range(256)) * 40


def populate(root: Path) -> None:
    (root / "keep.txt").write_text("line one\nline two\n")
    (root / "old.txt").write_text("to be renamed\n")
    (root / "gone.txt").write_text("to be deleted\n")
    (root / "olddir/inner").mkdir(parents=True)
    (root / "olddir/inner/x.py").write_text("print('x')\n")
    (root / "gonedir/sub").mkdir(parents=True)
    (root / "gonedir/sub/data.bin").write_bytes(BINARY)
    (root / "gonedir/run.sh").write_text("#!/bin/sh\necho hi\n")
    (root / "gonedir/run.sh").chmod(0o754)
    (root / "gonedir/sub").chmod(0o750)
    (root / "user.txt").write_text("the user's file\n")
    os.symlink("keep.txt", root / "link")


@pytest.fixture
def setup(tmp_path: Path) -> tuple[ToolContext, UndoJournal]:
    ctx = make_ctx(tmp_path)
    journal = UndoJournal(tmp_path / "data", ctx.workspace)
    ctx.journal = journal.task("conv-1", "task-1")
    populate(ctx.workspace.root)
    return ctx, journal


def ok(ctx: ToolContext, name: str, **arguments: Any) -> None:
    result = call(ctx, name, **arguments)
    assert result.ok, result.output


def test_undo_restores_exactly_what_the_tools_changed(setup) -> None:
    ctx, journal = setup
    root = ctx.workspace.root
    before = state(root)
    ok(ctx, "create_file", path="new/nested/made.txt", content="made\n")
    ok(ctx, "create_folder", path="empty/deep")
    ok(ctx, "modify_file", path="keep.txt", operation="replace", old_text="two", new_text="2")
    ok(ctx, "modify_file", path="keep.txt", operation="append", content="three\n")
    ok(ctx, "rename_file", old_path="old.txt", new_path="moved/renamed.txt")
    ok(ctx, "rename_file", old_path="olddir", new_path="newdir")
    ok(ctx, "modify_file", path="newdir/inner/x.py", operation="clear")
    ok(ctx, "delete_file", path="gone.txt")
    ok(ctx, "delete_file", path="gonedir")
    ok(ctx, "delete_file", path="link")
    ctx.journal.finish()
    (root / "user.txt").write_text("edited by the user meanwhile\n")
    (root / "user-new.txt").write_text("made by the user\n")

    result = journal.undo("conv-1")

    expected = dict(before)
    expected["user.txt"] = ("file", 0o644, b"edited by the user meanwhile\n")
    expected["user-new.txt"] = ("file", 0o644, b"made by the user\n")
    assert state(root) == expected
    assert result.task_id == "task-1" and result.skipped == []
    assert set(result.restored) == {
        "new",
        "new/nested",
        "new/nested/made.txt",
        "empty",
        "empty/deep",
        "keep.txt",
        "old.txt",
        "moved",
        "moved/renamed.txt",
        "olddir",
        "olddir/inner",
        "olddir/inner/x.py",
        "newdir",
        "newdir/inner",
        "newdir/inner/x.py",
        "gone.txt",
        "gonedir",
        "gonedir/sub",
        "gonedir/sub/data.bin",
        "gonedir/run.sh",
        "link",
    }
    assert "restored 21 path(s)" in result.message


def test_a_second_undo_changes_nothing_and_says_so(setup) -> None:
    ctx, journal = setup
    ok(ctx, "create_file", path="a.txt", content="a")
    ctx.journal.finish()
    assert journal.undo("conv-1").restored == ["a.txt"]
    (ctx.workspace.root / "a.txt").write_text("the user made it again")
    again = journal.undo("conv-1", "task-1")
    assert again.restored == [] and "already undone" in again.message
    assert (ctx.workspace.root / "a.txt").read_text() == "the user made it again"


def test_nothing_to_undo(tmp_path: Path) -> None:
    journal = UndoJournal(tmp_path / "data", Workspace(tmp_path))
    assert "Nothing to undo" in journal.undo("conv-1").message
    assert "message nope" in journal.undo("conv-1", "nope").message
    assert journal.undoable("conv-1") == []


def test_undo_of_command_changes(setup) -> None:
    ctx, journal = setup
    root = ctx.workspace.root
    (root / "same-size.txt").write_text("aaaa")  # changed below within the same timestamp tick
    before = state(root)
    script = (
        "printf bbbb > same-size.txt && mkdir -p out/deep && echo made > out/deep/f.txt && "
        "printf 'changed' >> keep.txt && mv old.txt renamed.txt && mv olddir movedir && "
        "rm -r gonedir && rm gone.txt && chmod 600 user.txt && head -c 5000 /dev/urandom > "
        "noise.bin && ln -sfn user.txt link"
    )
    ok(ctx, "run_command", command=script)
    ok(ctx, "run_python", code="open('keep.txt', 'w').write('python was here')")
    assert (root / "same-size.txt").read_text() == "bbbb"
    ctx.journal.finish()

    result = journal.undo("conv-1")
    assert state(root) == before
    assert result.skipped == []
    assert {"same-size.txt", "out/deep/f.txt", "gonedir/sub/data.bin", "link"} <= set(
        result.restored
    )


def test_a_failing_command_is_recorded_too(setup) -> None:
    ctx, journal = setup
    result = call(ctx, "run_command", command="echo half > half.txt; exit 3")
    assert not result.ok
    ctx.journal.finish()
    journal.undo("conv-1")
    assert not (ctx.workspace.root / "half.txt").exists()


def test_git_folders_are_not_scanned_for_commands(setup) -> None:
    ctx, journal = setup
    root = ctx.workspace.root
    (root / ".git").mkdir()
    ok(ctx, "run_command", command="echo ref > .git/HEAD && echo x > tracked.txt")
    ctx.journal.finish()
    assert journal.undo("conv-1").restored == ["tracked.txt"]
    assert (root / ".git/HEAD").read_text() == "ref\n"


def test_files_the_user_put_in_a_task_folder_stay(setup) -> None:
    ctx, journal = setup
    root = ctx.workspace.root
    ok(ctx, "create_file", path="made/by/task.txt", content="t")
    ctx.journal.finish()
    (root / "made/by/mine.txt").write_text("mine")
    result = journal.undo("conv-1")
    assert state(root)["made/by/mine.txt"][2] == b"mine"
    assert not (root / "made/by/task.txt").exists()
    assert any(s.startswith("made/by: folder is not empty") for s in result.skipped)


def test_undo_never_follows_a_link_out_of_the_workspace(setup, tmp_path: Path) -> None:
    ctx, journal = setup
    root = ctx.workspace.root
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "f.txt").write_text("outside")
    ok(ctx, "create_file", path="d/f.txt", content="inside")
    ctx.journal.finish()
    (root / "d/f.txt").unlink()
    (root / "d").rmdir()
    os.symlink(outside, root / "d")
    result = journal.undo("conv-1")
    assert [c.path for c in result.conflicts] == ["d", "d/f.txt"]  # left as they are
    result = journal.undo("conv-1", overwrite=True)
    assert (outside / "f.txt").read_text() == "outside"
    # the link goes (no d was there before the task), and d/f.txt is absent as it was then
    assert not os.path.lexists(root / "d") and result.skipped == []


def test_undo_puts_back_a_folder_a_link_out_replaced(setup, tmp_path: Path) -> None:
    ctx, journal = setup
    root = ctx.workspace.root
    outside = tmp_path / "outside"
    (outside / "inner").mkdir(parents=True)
    (outside / "inner" / "x.py").write_text("theirs")
    before = state(root / "olddir")
    ok(ctx, "run_command", command="rm -rf olddir && ln -s ../outside olddir")
    ctx.journal.finish()  # (what lies past the link is not read: those paths count unrecorded)
    result = journal.undo("conv-1", overwrite=True)
    assert result.skipped == []
    assert not (root / "olddir").is_symlink() and state(root / "olddir") == before
    assert (outside / "inner" / "x.py").read_text() == "theirs"


def test_huge_files_are_reported_not_kept(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    journal = UndoJournal(tmp_path / "data", ctx.workspace, max_file_bytes=1000)
    ctx.journal = journal.task("conv-1", "t")
    root = ctx.workspace.root
    (root / "big.bin").write_bytes(b"x" * 2000)
    (root / "small.txt").write_text("small")
    ok(ctx, "run_command", command="echo y >> big.bin && echo more >> small.txt")
    ctx.journal.finish()
    result = journal.undo("conv-1")
    assert result.restored == ["small.txt"] and (root / "small.txt").read_text() == "small"
    assert len(result.skipped) == 1 and result.skipped[0].startswith("big.bin: not kept")
    assert "over the" in result.skipped[0] and "could not be restored" in result.message


def test_tasks_newest_first_and_undo_by_id(setup) -> None:
    ctx, journal = setup
    ok(ctx, "create_file", path="first.txt", content="1")
    ctx.journal.finish()
    ctx.journal = journal.task("conv-1", "task-2")
    ok(ctx, "read_file", path="first.txt")
    ctx.journal.finish()
    ctx.journal = journal.task("conv-1", "task-3")
    ok(ctx, "create_file", path="third.txt", content="3")
    ctx.journal.finish()
    assert journal.undoable("conv-1") == ["task-3", "task-1"]  # task-2 changed nothing
    assert journal.undo("conv-1", "task-1").restored == ["first.txt"]
    assert (ctx.workspace.root / "third.txt").exists()
    assert journal.undo("conv-1").restored == ["third.txt"]


def test_only_the_first_state_of_a_path_counts(setup) -> None:
    ctx, journal = setup
    for text in ("v1", "v2", "v3"):
        ok(ctx, "create_file", path="keep.txt", content=text)
    ok(ctx, "run_command", command="echo v4 > keep.txt")
    ctx.journal.finish()
    journal.undo("conv-1")
    assert (ctx.workspace.root / "keep.txt").read_text() == "line one\nline two\n"


def test_old_journals_and_their_blobs_are_collected(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    journal = UndoJournal(tmp_path / "data", ctx.workspace, keep_tasks=3)
    (ctx.workspace.root / "f.txt").write_text("content 0")
    for i in range(1, 6):
        ctx.journal = journal.task("conv-1", f"t{i}")
        ok(ctx, "create_file", path="f.txt", content=f"content {i}")
        ctx.journal.finish()
    assert journal.undoable("conv-1") == ["t5", "t4", "t3"]
    blobs = {p.name for p in (tmp_path / "data/undo/blobs").glob("*/*")}
    kept = [json.loads(p.read_text()) for p in (tmp_path / "data/undo/tasks/conv-1").iterdir()]
    assert blobs == {m["entries"]["f.txt"]["blob"] for m in kept}
    assert len(blobs) == 3
    journal.undo("conv-1", "t3", overwrite=True)  # over what t4 and t5 wrote
    assert (ctx.workspace.root / "f.txt").read_text() == "content 2"


def test_a_snapshot_of_a_few_thousand_unchanged_files_finds_no_change(tmp_path: Path) -> None:
    shm = Path("/dev/shm")  # creating thousands of files on a busy disk is slow in itself
    base = Path(tempfile.mkdtemp(dir=shm if shm.is_dir() else tmp_path))
    try:
        _snapshot_twice(base)
    finally:
        shutil.rmtree(base)


def _snapshot_twice(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    root = ctx.workspace.root
    for d in range(40):
        (root / f"pkg{d}").mkdir()
        for f in range(50):
            (root / f"pkg{d}/mod{f}.py").write_text(f"# module {d}.{f}\n" * 40)
    past = time.time() - 60
    for path in root.rglob("*.py"):
        os.utime(path, (past, past))
    journal = UndoJournal(tmp_path / "data", ctx.workspace)
    task = journal.task("conv-1", "t")
    task.record_changes_since(task.snapshot())  # fills the blob store and the hash cache
    assert task.record_changes_since(task.snapshot()) == []  # its speed: bench/workspace.py


def test_the_agent_loop_undoes_a_task_byte_for_byte(fake_llm: FakeLLM, tmp_path: Path) -> None:
    terminal = make_terminal(fake_llm, tmp_path)
    root = terminal.services.workspace.root
    populate(root)
    before = state(root)
    fake_llm.script(
        Reply(
            tool_calls=[
                Call("create_file", {"path": "src/app.py", "content": "print('app')\n"}),
                Call("modify_file", {"path": "keep.txt", "operation": "clear"}),
                Call("rename_file", {"old_path": "old.txt", "new_path": "docs/old.md"}),
                Call("delete_file", {"path": "gonedir"}),
                Call("run_command", {"command": "cp user.txt copy.txt && rm gone.txt"}),
            ]
        ),
        Reply(content="All done."),
    )
    assert ask(terminal, "reorganise") == "complete"
    assert state(root) != before
    result = terminal.undo()
    assert state(root) == before
    assert terminal.conversation is not None
    message_id = terminal.conversation.path()[0]["id"]
    assert result.task_id == message_id and "gonedir/sub/data.bin" in result.restored
    assert "already undone" in terminal.undo(message_id).message


def test_undo_is_refused_while_a_task_runs(fake_llm: FakeLLM, tmp_path: Path) -> None:
    terminal = make_terminal(fake_llm, tmp_path, approval="ask")
    fake_llm.script(Reply(tool_calls=[Call("run_command", {"command": "true"})]))
    thread = run_in_thread(terminal, "wait for me")
    request = terminal.wait_for("tool", phase="approval")
    with pytest.raises(TaskBusy):
        terminal.undo()
    terminal.approve(request["call_id"], False)
    thread.join(10)


def test_journals_are_thread_safe(setup) -> None:
    ctx, journal = setup
    tasks = [journal.task("conv-1", f"par-{i}") for i in range(4)]

    def work(i: int) -> None:
        for j in range(20):
            path = ctx.workspace.root / f"t{i}-{j}.txt"
            tasks[i].before_change(path)
            path.write_text("x")
        tasks[i].finish()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for i in range(4):
        assert len(journal.undo("conv-1", f"par-{i}").restored) == 20
    assert not list(ctx.workspace.root.glob("t*-*.txt"))


def test_a_change_within_one_timestamp_tick_is_still_seen(setup) -> None:
    ctx, journal = setup
    task = journal.task("conv-1", "tick")
    target = ctx.workspace.root / "keep.txt"
    snap = task.snapshot()
    assert "keep.txt" in snap.racy  # written moments ago by the test
    target.write_text("LINE ONE\nLINE TWO\n")
    info = target.lstat()
    old = snap.stats["keep.txt"]
    # as if the write had landed in the same timestamp tick as the snapshot
    snap.stats["keep.txt"] = old._replace(
        size=info.st_size, mtime_ns=info.st_mtime_ns, ctime_ns=info.st_ctime_ns, ino=info.st_ino
    )
    assert task.record_changes_since(snap) == ["keep.txt"]
    task.finish()
    journal.undo("conv-1", "tick")
    assert target.read_text() == "line one\nline two\n"


def test_the_scan_after_a_command_runs_behind_its_result(setup) -> None:
    """A command's result goes back before the scan after it; whoever uses the journal next
    (here `undoable`, as the page asks when the task ends) waits for that scan."""
    ctx, journal = setup
    task = journal.task("conv", "t1")
    snap = task.snapshot()
    (ctx.workspace.root / "made-by-the-command.txt").write_text("new")
    answered: list[list[str]] = []
    asking = threading.Thread(target=lambda: answered.append(journal.undoable("conv")))
    with journal._lock:  # the journal busy elsewhere: the scan cannot start yet
        task.record_changes_later(snap)  # returns at once all the same
        asking.start()
        asking.join(0.3)
        assert asking.is_alive() and answered == []
    asking.join(10)
    assert answered == [["t1"]]
    task.finish()
    journal.undo("conv", "t1")
    assert not (ctx.workspace.root / "made-by-the-command.txt").exists()


def test_a_copy_stops_at_the_limit_while_its_file_grows(tmp_path: Path) -> None:
    """A command still writing a file while undo copies it: the copy read on to its end, past
    the limit, as long as the file kept growing. It stops at the limit now, saying so."""
    limit = 8 * 2**20
    root = tmp_path / "ws"
    root.mkdir()
    growing = root / "growing.bin"
    growing.write_bytes(os.urandom(2 * 2**20))  # under the limit when it is looked at
    journal = UndoJournal(tmp_path / "data", Workspace(root), max_file_bytes=limit)
    done = threading.Event()

    def grow() -> None:
        chunk = bytes(2**20)
        with growing.open("ab") as out:
            for _ in range(400):  # at most 400 MB more, stopped as soon as the copy ended
                if done.is_set():
                    return
                out.write(chunk)
                out.flush()

    writer = threading.Thread(target=grow)
    writer.start()
    try:
        kept = journal.keeper.state_of(journal.workspace, "growing.bin")
    finally:
        done.set()
        writer.join()
    blobs = [p.stat().st_size for p in (tmp_path / "data").rglob("*") if p.is_file()]
    if kept["kind"] == "lost":  # it outgrew the limit: while copied, or before it was looked at
        assert "limit for undo copies" in kept["reason"], kept
    else:  # the copy won the race: what it kept is whole
        assert kept["kind"] == "file" and kept["size"] <= limit, kept
    assert max(blobs, default=0) <= limit + 2**20, blobs  # the index too, never a huge blob


def test_the_baseline_child_limits_its_memory(tmp_path: Path) -> None:
    """The baseline child walks and copies a workspace a task filled: it has a memory limit of
    its own, as the other children reading what a task wrote have."""
    root = tmp_path / "ws"
    root.mkdir()
    (root / "a.txt").write_text("a\n")
    os.utime(root / "a.txt", (time.time() - 60, time.time() - 60))  # not racy: it is indexed
    script = (
        "import resource, sys\n"
        "from modules.undo import journal\n"
        "journal._build_baseline(sys.argv[1:])\n"
        "print(resource.getrlimit(resource.RLIMIT_AS)[0])\n"
    )
    argv = [sys.executable, "-c", script, str(tmp_path / "data"), str(root), "0", "0"]
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) == BASELINE_MEMORY_BYTES
    journal = UndoJournal(tmp_path / "data", Workspace(root))
    assert "a.txt" in journal.keeper.index.stats  # it built the baseline all the same
