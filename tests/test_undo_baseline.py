"""The undo baseline: built by a child before the first command, waited for, shared; and
the snapshot's fast path (one scan compared with the index) still sees every change."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from modules.tools.tool_context import ToolContext
from modules.undo.journal import UndoJournal
from tests.kit.processes import live_command_lines
from tests.kit.tools import call, state
from utils.files import directory_lock

PAST = time.time() - 120


def make_files(root: Path, count: int = 40) -> None:
    """`count` files in four folders and a symlink, dated in the past (trusted once read)."""
    for i in range(count):
        path = root / f"d{i % 4}" / f"f{i}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"file {i}\n" * (i + 1))
        os.utime(path, (PAST, PAST))
    os.symlink("d0/f0.txt", root / "link")
    os.utime(root / "link", (PAST, PAST), follow_symlinks=False)


@pytest.fixture
def ctx(ctx: ToolContext) -> ToolContext:
    make_files(ctx.workspace.root)
    return ctx


def run(ctx: ToolContext, journal: UndoJournal, task: str, command: str) -> None:
    ctx.journal = journal.task("conv-1", task)
    result = call(ctx, "run_command", command=command)
    assert result.ok, result.output
    ctx.journal.finish()


EDIT = "echo changed > d0/f0.txt; rm d1/f1.txt; rm -r d2; echo new > d3/new.txt; ln -sfn d3 link"


def test_after_the_baseline_the_first_command_reads_nothing_and_undoes_exactly(
    ctx: ToolContext, tmp_path: Path, reads: list[str]
) -> None:
    journal = UndoJournal(tmp_path / "data", ctx.workspace)
    before = state(ctx.workspace.root)
    journal.start_baseline()
    journal.baseline.wait()
    run(ctx, journal, "t1", EDIT)
    assert reads == []  # the child kept every file; this process only compared stats
    result = journal.undo("conv-1")
    assert result.skipped == [] and state(ctx.workspace.root) == before


def test_a_command_right_after_opening_waits_for_the_baseline(
    ctx: ToolContext, tmp_path: Path, reads: list[str]
) -> None:
    journal = UndoJournal(tmp_path / "data", ctx.workspace)
    before = state(ctx.workspace.root)
    journal.start_baseline()
    run(ctx, journal, "t1", EDIT)  # no wait of its own: the snapshot waits for the child
    assert reads == []
    assert journal.undo("conv-1").skipped == [] and state(ctx.workspace.root) == before


def test_a_stopped_baseline_leaves_the_command_to_keep_what_is_missing(
    ctx: ToolContext, tmp_path: Path
) -> None:
    journal = UndoJournal(tmp_path / "data", ctx.workspace)
    before = state(ctx.workspace.root)
    journal.start_baseline()
    journal.close()  # at once: the child may have kept anything from nothing to all
    run(ctx, journal, "t1", EDIT)
    assert journal.undo("conv-1").skipped == [] and state(ctx.workspace.root) == before


def test_a_journal_closed_before_its_warm_up_starts_no_child(
    ctx: ToolContext, tmp_path: Path
) -> None:
    journal = UndoJournal(tmp_path / "data", ctx.workspace)
    journal.close()  # a server stopped before its warm-up thread ran
    journal.start_baseline()
    children = live_command_lines(os.getpid()).values()
    assert not [line for line in children if "modules.undo.journal" in line]


def test_a_snapshot_waits_while_another_process_builds(ctx: ToolContext, tmp_path: Path) -> None:
    journal = UndoJournal(tmp_path / "data", ctx.workspace)
    journal.root.mkdir(parents=True)
    held, release = threading.Event(), threading.Event()

    def other_builder() -> None:  # the lock another process's child holds while it builds
        with directory_lock(journal.root):
            held.set()
            release.wait(10)

    thread = threading.Thread(target=other_builder)
    thread.start()
    held.wait(10)
    threading.Timer(0.3, release.set).start()
    started = time.monotonic()
    journal.task("conv-1", "t").snapshot()
    assert time.monotonic() - started >= 0.3
    thread.join()


def test_the_index_of_an_earlier_process_is_reused(
    ctx: ToolContext, tmp_path: Path, reads: list[str]
) -> None:
    first = UndoJournal(tmp_path / "data", ctx.workspace)
    first.start_baseline()
    first.baseline.wait()
    later = UndoJournal(tmp_path / "data", ctx.workspace)  # as a new process has it
    task = later.task("conv-1", "t")
    snap = task.snapshot()
    assert reads == [] and snap.racy == set() and snap.lost == {}
    assert task.record_changes_since(snap) == []


def test_a_file_replaced_with_the_same_size_and_mtime_is_seen(
    ctx: ToolContext, tmp_path: Path, reads: list[str]
) -> None:
    root = ctx.workspace.root
    journal = UndoJournal(tmp_path / "data", ctx.workspace)
    run(ctx, journal, "warm", "true")  # every file indexed
    target = root / "d1/f5.txt"
    old_text, old_inode = target.read_text(), target.stat().st_ino
    replacement = root / "d1/.f5.new"  # same size and mtime; a new inode moved over it
    replacement.write_text(old_text.upper())
    os.utime(replacement, (PAST, PAST))
    os.replace(replacement, target)
    assert target.stat().st_ino != old_inode and target.stat().st_mtime == PAST
    reads.clear()
    restarted = UndoJournal(tmp_path / "data", ctx.workspace)
    run(ctx, restarted, "t1", "echo gone > d1/f5.txt")
    assert reads == ["d1/f5.txt"]  # only the file that changed since the index was written
    restarted.undo("conv-1", "t1")
    assert target.read_text() == old_text.upper()  # what was there before the command


def test_two_processes_build_and_snapshot_at_once(
    ctx: ToolContext, tmp_path: Path, reads: list[str]
) -> None:
    journals = [UndoJournal(tmp_path / "data", ctx.workspace) for _ in range(2)]
    for journal in journals:  # two children: one builds, the other waits for its lock
        journal.start_baseline()
    found: list[list[str]] = []
    errors: list[BaseException] = []

    def conversation(journal: UndoJournal, n: int) -> None:
        try:
            for step in range(5):
                task = journal.task(f"conv-{n}", f"t{step}")
                found.append(task.record_changes_since(task.snapshot()))
        except BaseException as exc:  # handed to the test thread
            errors.append(exc)

    threads = [threading.Thread(target=conversation, args=(j, n)) for n, j in enumerate(journals)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == [] and found == [[]] * 10
    assert reads == []  # whichever child ran first kept everything
    before = state(ctx.workspace.root)
    run(ctx, journals[1], "t1", EDIT)  # ended, before another process is asked
    assert journals[0].undo("conv-1").skipped == [] and state(ctx.workspace.root) == before
