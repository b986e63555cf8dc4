"""The undo file index: it survives restarts, sees changes made meanwhile, heals, is shared."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from modules.undo.blob_store import Stat
from modules.undo.index import FileIndex
from modules.undo.journal import UndoJournal
from modules.workspace.paths import Workspace
from tests.kit.tools import call, make_ctx

REPO = Path(__file__).resolve().parent.parent
PAST = time.time() - 120


def make_files(root: Path, count: int = 30, prefix: str = "f") -> None:
    """`count` files in two folders, dated in the past (so their hashes are trusted)."""
    for i in range(count):
        path = root / f"d{i % 2}" / f"{prefix}{i}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"content {prefix} {i}\n" * (i + 1))
        os.utime(path, (PAST, PAST))


def command_cycle(journal: UndoJournal, task: str = "t") -> list[str]:
    """A snapshot and its comparison, as a command with no effect gets."""
    journal_task = journal.task("conv-1", task)
    return journal_task.record_changes_since(journal_task.snapshot())


def test_a_new_journal_hashes_nothing_unchanged(tmp_path: Path, reads: list[str]) -> None:
    ws = Workspace(tmp_path / "ws")
    make_files(ws.root)
    assert command_cycle(UndoJournal(tmp_path / "data", ws)) == []
    assert len(reads) == 30
    reads.clear()
    restarted = UndoJournal(tmp_path / "data", Workspace(tmp_path / "ws"))  # a new process
    assert command_cycle(restarted) == []
    assert reads == []


def test_changes_made_while_no_process_ran_are_seen(tmp_path: Path, reads: list[str]) -> None:
    ctx = make_ctx(tmp_path)
    root = ctx.workspace.root
    make_files(root)
    command_cycle(UndoJournal(tmp_path / "data", ctx.workspace))
    same_inode = root / "d0/f0.txt"  # same size, mtime put back: only ctime tells
    same_inode.write_text(same_inode.read_text().upper())
    os.utime(same_inode, (PAST, PAST))
    new_inode = root / "d1/f1.txt"  # replaced by a new file of the same size and mtime
    text = new_inode.read_text()
    new_inode.unlink()
    (root / "d1/other.txt").write_text("takes the old inode, maybe")
    new_inode.write_text(text.upper())
    os.utime(new_inode, (PAST, PAST))
    resized = root / "d0/f2.txt"
    resized.write_text("shorter\n")
    os.utime(resized, (PAST, PAST))
    reads.clear()

    journal = UndoJournal(tmp_path / "data", ctx.workspace)
    ctx.journal = journal.task("conv-1", "t")
    assert call(ctx, "run_command", command="echo gone > d0/f0.txt; rm d1/f1.txt d0/f2.txt").ok
    ctx.journal.finish()
    assert {"d0/f0.txt", "d1/f1.txt", "d0/f2.txt", "d1/other.txt"} <= set(reads)
    journal.undo("conv-1")
    assert same_inode.read_text() == "CONTENT F 0\n"  # the content before the command
    assert new_inode.read_text() == text.upper()
    assert resized.read_text() == "shorter\n"


def _index(tmp_path: Path) -> Path:
    return tmp_path / "data/undo/index.sqlite"


@pytest.mark.parametrize("damage", ["garbage", "missing", "bad blob"])
def test_a_damaged_or_missing_index_is_rebuilt(
    tmp_path: Path, reads: list[str], damage: str
) -> None:
    ws = Workspace(tmp_path / "ws")
    make_files(ws.root)
    command_cycle(UndoJournal(tmp_path / "data", ws))
    index = _index(tmp_path)
    if damage == "garbage":
        index.write_bytes(b"this is not a database" * 100)
    elif damage == "missing":
        index.unlink()
    else:
        with sqlite3.connect(index) as conn:
            conn.execute("UPDATE workspaces SET data = ?", (b"\x00garbage",))
        conn.close()
    reads.clear()
    assert command_cycle(UndoJournal(tmp_path / "data", ws)) == []
    assert len(reads) == 30  # nothing trusted from a damaged index
    reads.clear()
    assert command_cycle(UndoJournal(tmp_path / "data", ws)) == []
    assert reads == []  # and it was written anew


def test_a_removed_blob_store_empties_the_index(tmp_path: Path, reads: list[str]) -> None:
    ctx = make_ctx(tmp_path)
    make_files(ctx.workspace.root)
    command_cycle(UndoJournal(tmp_path / "data", ctx.workspace))
    os.rename(tmp_path / "data/undo/blobs", tmp_path / "blobs-aside")
    reads.clear()
    journal = UndoJournal(tmp_path / "data", ctx.workspace)
    ctx.journal = journal.task("conv-1", "t")
    assert call(ctx, "run_command", command="echo x > d0/f0.txt").ok
    ctx.journal.finish()
    assert len(reads) == 30
    journal.undo("conv-1")
    assert (ctx.workspace.root / "d0/f0.txt").read_text() == "content f 0\n"


def test_a_blob_removed_under_a_snapshot_is_reported_lost(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    make_files(ctx.workspace.root)
    journal = UndoJournal(tmp_path / "data", ctx.workspace)
    command_cycle(journal)
    task = journal.task("conv-1", "t")
    snap = task.snapshot()
    journal.blobs.path(snap.digests["d0/f0.txt"]).unlink()  # as another process's collection
    (ctx.workspace.root / "d0/f0.txt").write_text("changed")
    assert task.record_changes_since(snap) == ["d0/f0.txt"]
    result = journal.undo("conv-1")
    assert result.skipped and "removed from the data folder" in result.skipped[0]


def test_collection_keeps_the_blobs_the_index_names(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    make_files(ctx.workspace.root)
    journal = UndoJournal(tmp_path / "data", ctx.workspace, keep_tasks=2)
    command_cycle(journal)
    for i in range(4):  # each task writes a manifest; older ones are pruned with their blobs
        ctx.journal = journal.task("conv-1", f"t{i}")
        assert call(ctx, "run_command", command=f"echo {i} > new{i}.txt").ok
    assert all(journal.blobs.has(d) for d in journal.keeper.index.hashes.values())
    restarted = UndoJournal(tmp_path / "data", ctx.workspace)
    ctx.journal = restarted.task("conv-1", "last")
    assert call(ctx, "run_command", command="rm -r d0").ok
    ctx.journal.finish()
    assert restarted.undo("conv-1").skipped == []
    assert (ctx.workspace.root / "d0/f4.txt").read_text() == "content f 4\n" * 5


_WRITER = """
import os, sys, time
from pathlib import Path
sys.path.insert(0, {repo!r})
from modules.workspace.paths import Workspace
from modules.undo.journal import UndoJournal
root, data, prefix = Path({root!r}), Path({data!r}), {prefix!r}
journal = UndoJournal(data, Workspace(root))
past = time.time() - 120
for i in range(15):
    path = root / f"{{prefix}}{{i}}.txt"
    path.write_text(f"{{prefix}} {{i}}" * 50)
    os.utime(path, (past, past))
    task = journal.task("conv-1", f"{{prefix}}-{{i}}")
    task.record_changes_since(task.snapshot())
"""


def test_two_processes_share_the_index(tmp_path: Path, reads: list[str]) -> None:
    root, data = tmp_path / "ws", tmp_path / "data"
    make_files(root)
    command_cycle(UndoJournal(data, Workspace(root)))
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                _WRITER.format(repo=str(REPO), root=str(root), data=str(data), prefix=prefix),
            ],
            stderr=subprocess.PIPE,
        )
        for prefix in ("a", "b")
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err.decode()
    reads.clear()
    fresh = UndoJournal(data, Workspace(root))
    assert command_cycle(fresh) == []
    assert reads == []  # every file of both writers (and the first) is indexed, unread now
    assert len(fresh.keeper.index.hashes) == 60


@pytest.mark.parametrize("stale_first", [True, False])
def test_of_two_entries_with_one_ctime_the_index_keeps_what_the_file_is(
    tmp_path: Path, stale_first: bool
) -> None:
    """A file written and touched within one clock tick keeps its ctime: a process that read
    it between the two must not replace the other's entry, whichever flushes last."""
    root = tmp_path / "ws"
    root.mkdir()
    (root / "f.txt").write_text("x")
    now = Stat.of(os.lstat(root / "f.txt"))
    assert now is not None
    stale = now._replace(mtime_ns=now.mtime_ns - 1)
    path = tmp_path / "index.sqlite"
    writers = [FileIndex(path, str(root)), FileIndex(path, str(root))]
    assert all(index.stats == {} for index in writers)  # each read the index, as a scan does
    for index, info in zip(writers, (stale, now) if stale_first else (now, stale), strict=True):
        index.put("f.txt", info, "digest")
        index.flush()
    assert FileIndex(path, str(root)).stats["f.txt"] == tuple(now)


def test_a_workspace_folder_that_is_gone_leaves_the_index(tmp_path: Path) -> None:
    data = tmp_path / "data"
    gone = tmp_path / "gone"
    make_files(gone, 4, prefix="g")
    old = UndoJournal(data, Workspace(gone))
    command_cycle(old)
    kept = set(old.keeper.index.hashes.values())
    assert len(kept) == 4 and all(old.blobs.has(d) for d in kept)
    shutil.rmtree(gone)
    ctx = make_ctx(tmp_path)
    journal = UndoJournal(data, ctx.workspace, keep_tasks=1)
    for i in range(2):  # the second task's manifest prunes the first, then collects blobs
        ctx.journal = journal.task("conv-1", f"t{i}")
        assert call(ctx, "create_file", path=f"n{i}.txt", content=f"{i}").ok
    assert not any(journal.blobs.has(d) for d in kept)
