"""The workspace watcher: the changes it reports, the noise it skips, its batches and its stop."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from modules.workspace.change_batch import FOLD_ABOVE
from modules.workspace.file_watcher import MEMORY_BYTES, WorkspaceWatcher
from tests.fake_llm import FakeLLM
from tests.kit.clients import connected
from tests.kit.processes import live_command_lines
from tests.kit.server import REPO, serving
from tests.kit.waits import wait_until


class WatcherRun:
    """A WorkspaceWatcher on a temporary folder, its batches collected."""

    def __init__(self, root: Path) -> None:
        self.batches: list[list[dict[str, Any]]] = []
        self.refreshed: list[dict[str, Any]] = []
        self.reader: threading.Thread | None = None
        self.watcher = WorkspaceWatcher(
            root, on_changes=self._batch, start_background_task=self._start
        )
        self.watcher.start()
        assert self.watcher.ready.wait(10), "the watcher child never became ready"

    def _batch(self, changes: list[dict[str, Any]], refresh: list[dict[str, Any]]) -> None:
        self.batches.append(changes)
        self.refreshed += refresh

    def _start(self, target: Callable[[], None]) -> None:
        self.reader = threading.Thread(target=target, daemon=True)
        self.reader.start()

    def changes(self) -> list[dict[str, Any]]:
        return [change for batch in self.batches for change in batch]

    def wait_for(self, path: str, timeout: float = 3) -> dict[str, Any]:
        """The last change reported for `path` (as the source or the destination of a move)."""

        def last() -> dict[str, Any] | None:
            found = [c for c in self.changes() if path in (c["path"], c.get("dest_path"))]
            return found[-1] if found else None

        return wait_until(
            last, timeout, f"a change for {path}", details=lambda: f"got {self.changes()}"
        )


def test_watcher_reports_changes_and_skips_noise(tmp_path: Path):
    root = tmp_path / "ws"
    root.mkdir()
    run = WatcherRun(root)
    try:
        (root / ".git").mkdir()
        (root / ".git" / "index").write_text("x")
        (root / "notes.txt.swp").write_text("x")
        (root / "sub").mkdir()
        (root / "sub" / "a.txt").write_text("a")
        assert run.wait_for("sub/a.txt")["is_dir"] is False
        (root / "sub" / "a.txt").rename(root / "sub" / "b.txt")
        moved = run.wait_for("sub/b.txt")  # the move came after the noise, so did its change
        assert moved["event"] == "moved" and moved["path"] == "sub/a.txt"
        paths = {c["path"] for c in run.changes()}
        assert not any(p.startswith(".git") or p.endswith(".swp") for p in paths)
        assert {"event": "created", "path": "sub", "is_dir": True} in run.changes()
    finally:
        run.watcher.stop()


def test_watcher_batches_name_each_path_once_and_fold_a_burst(tmp_path: Path):
    root = tmp_path / "ws"
    (root / "quiet").mkdir(parents=True)
    run = WatcherRun(root)
    try:
        flapping = root / "quiet" / "flap.txt"
        flapping.write_text("1")
        flapping.unlink()
        flapping.write_text("2")
        assert run.wait_for("quiet/flap.txt")["event"] == "created"
        (root / "burst").mkdir()
        for n in range(1500):
            (root / "burst" / f"f{n:05d}").write_bytes(b"x")  # created, then modified
        wait_until(lambda: run.refreshed, 5, "a folded folder")
        assert {folder["path"] for folder in run.refreshed} <= {"burst", ""}
        for batch in run.batches:
            assert len(batch) <= FOLD_ABOVE + 1
            assert len({c["path"] for c in batch}) == len(batch), batch
        assert [c["event"] for c in run.changes() if c["path"] == "quiet/flap.txt"] == ["created"]
    finally:
        run.watcher.stop()
    assert run.reader is not None
    run.reader.join(5)
    assert not run.reader.is_alive(), "the watcher still reads after stop"
    seen = len(run.batches)
    (root / "after-stop.txt").write_text("x")
    assert len(run.batches) == seen


def test_the_page_learns_that_live_tree_updates_stopped(tmp_path: Path, fake_llm: FakeLLM):
    """The watcher child has a memory limit; when it dies (that limit, a crash), every client
    is told live updates stopped, and a tree asked for later says so: the tree went still and
    nobody knew."""
    with serving(tmp_path, fake_llm, {}, {}) as server, connected(server.url) as client:
        assert server.pid is not None
        [watcher] = [
            pid
            for pid, argv in live_command_lines(server.pid).items()
            if "modules.workspace.file_watcher" in argv
        ]
        limit = f"Max address space         {MEMORY_BYTES}"  # set by the child first thing
        wait_until(lambda: limit in Path(f"/proc/{watcher}/limits").read_text(), 20, limit)
        assert client.named("notice") == []
        os.kill(watcher, signal.SIGKILL)
        notice = client.wait_for("notice", timeout=20, code="live_tree_stopped")
        assert "Live file-tree updates stopped" in notice["message"]
        assert "exit code -9" in notice["message"] and "conversation_id" not in notice
        with connected(server.url) as later:
            tree = later.call("get_file_tree", {})
        assert tree["ok"] and tree["live_stopped"] == notice["message"]  # the server goes on


UNSHARE = shutil.which("unshare")


def _user_namespaces() -> bool:
    if UNSHARE is None:
        return False
    done = subprocess.run([UNSHARE, "--user", "--map-root-user", "true"], capture_output=True)
    return done.returncode == 0


@pytest.mark.skipif(not _user_namespaces(), reason="unshare cannot make a user namespace here")
def test_the_child_ends_saying_so_when_inotify_watches_run_out(tmp_path: Path):
    """watchdog leaves a folder it could not watch unsaid (its changes were silently lost):
    the child, in a user namespace of its own with 5 inotify watches, says why and ends."""
    root = tmp_path / "ws"
    (root / "a").mkdir(parents=True)
    script = (
        "echo 5 > /proc/sys/user/max_inotify_watches && "
        f'exec "$0" -m modules.workspace.file_watcher {root}'
    )
    child = subprocess.Popen(
        [UNSHARE or "unshare", "--user", "--map-root-user", "sh", "-c", script, sys.executable],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        assert json.loads(child.stdout.readline()) == {"ready": True}
        for index in range(10):  # more folders than watches are left
            (root / f"folder{index}").mkdir()
        lines = [json.loads(line) for line in child.stdout]  # until it ends
        assert child.wait(20) == 1
    finally:
        child.kill()
        child.wait()
    [stopped] = [line["stopped"] for line in lines if "stopped" in line]
    assert "inotify watches ran out" in stopped and "inotify watch limit reached" in stopped
    assert "max_user_watches" in stopped
