"""Workspace benchmark: the file tree of 20,000 files and undo snapshots of 2,000 files.

Run from the repo root: `python bench/workspace.py [--check]`.
The files go to /dev/shm when there is one, so that the disk does not slow the set-up.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from modules.undo.journal import UndoJournal
from modules.workspace.annotations import AnnotationStore
from modules.workspace.file_tree import file_tree
from modules.workspace.paths import Workspace

SAMPLES = 5
MAX_TREE_MS = 500.0
MAX_SNAPSHOT_MS = 1000.0


def _timed(action: Callable[[], Any]) -> float:
    """The median milliseconds of SAMPLES runs of `action`."""
    times = []
    for _ in range(SAMPLES):
        started = time.perf_counter()
        action()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def _tree(base: Path) -> tuple[float, float]:
    """Full and default (capped) file_tree of 100 folders of 200 empty files, in ms."""
    root = base / "tree"
    for d in range(100):
        folder = root / f"dir{d:03}"
        folder.mkdir(parents=True)
        for f in range(200):
            os.close(os.open(folder / f"file{f:03}.py", os.O_CREAT | os.O_WRONLY))
    workspace, annotations = Workspace(root), AnnotationStore(base / "tree-data")
    tree = file_tree(workspace, annotations, max_entries=50_000)
    assert sum(len(c["children"]) for c in tree["children"]) == 20_000
    full = _timed(lambda: file_tree(workspace, annotations, max_entries=50_000))
    capped = _timed(lambda: file_tree(workspace, annotations))
    return full, capped


def _snapshot(base: Path) -> float:
    """A snapshot and its comparison over 2,000 unchanged files, hashes cached, in ms."""
    root = base / "undo"
    for d in range(40):
        (root / f"pkg{d}").mkdir(parents=True)
        for f in range(50):
            (root / f"pkg{d}/mod{f}.py").write_text(f"# module {d}.{f}\n" * 40)
    past = time.time() - 60  # older than the racy window, so the cached hashes are trusted
    for path in root.rglob("*.py"):
        os.utime(path, (past, past))
    task = UndoJournal(base / "undo-data", Workspace(root)).task("bench", "t")
    task.record_changes_since(task.snapshot())  # fills the blob store and the hash cache

    def again() -> None:
        assert task.record_changes_since(task.snapshot()) == []

    return _timed(again)


def run() -> bool:
    """Run the measurements, print them and return whether every expectation held."""
    shm = Path("/dev/shm")
    with tempfile.TemporaryDirectory(dir=shm if shm.is_dir() else None) as tmp:
        full_ms, capped_ms = _tree(Path(tmp))
        snapshot_ms = _snapshot(Path(tmp))
    full_ok, capped_ok = full_ms <= MAX_TREE_MS, capped_ms <= MAX_TREE_MS
    snapshot_ok = snapshot_ms <= MAX_SNAPSHOT_MS
    print(
        f"file_tree, 20,000 files, all listed (median)   {full_ms:8.1f} ms  "
        f"expected <= {MAX_TREE_MS:.0f} ms   {_verdict(full_ok)}"
    )
    print(
        f"file_tree, 20,000 files, default cap (median)  {capped_ms:8.1f} ms  "
        f"expected <= {MAX_TREE_MS:.0f} ms   {_verdict(capped_ok)}"
    )
    print(
        f"undo snapshot + compare, 2,000 unchanged files {snapshot_ms:8.1f} ms  "
        f"expected <= {MAX_SNAPSHOT_MS:.0f} ms   {_verdict(snapshot_ok)}"
    )
    return full_ok and capped_ok and snapshot_ok


def main() -> int:
    """Entry point; exit code 1 only with --check and a failed expectation."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if an expectation fails")
    args = parser.parse_args()
    ok = run()
    return 1 if args.check and not ok else 0


if __name__ == "__main__":
    sys.exit(main())
