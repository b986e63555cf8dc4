"""Live workspace changes: a watchdog observer in a child process, batched, read as JSON lines.

The observer runs in its own process because eventlet's monkey patching breaks watchdog's
threads; the parent only reads lines from a pipe, which works the same under both async modes.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from modules.workspace.change_batch import ChangeBatch
from modules.workspace.ignore import WorkspaceIgnore
from utils.settings import PROGRAM_DIR

log = logging.getLogger(__name__)

BATCH_SECONDS = 0.1
BURST_SECONDS = 1.0  # after a batch that had folders folded: a burst is going on


class _Batcher:
    """Collects changes and writes them as one JSON line at most every BATCH_SECONDS (every
    BURST_SECONDS while a burst lasts), each path once and crowded folders folded
    (modules.workspace.change_batch).

    Changes to what the file tree does not show (modules.workspace.ignore) are dropped.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self.hidden = WorkspaceIgnore(root)
        self._lock = threading.Lock()
        self._batch = ChangeBatch()

    def relative(self, path: str, is_dir: bool) -> str | None:
        try:
            rel = Path(path).relative_to(self.root).as_posix()
        except ValueError:
            return None
        return None if rel == "." or self.hidden.hides(rel, is_dir) else rel

    def add(self, kind: str, src: str, dest: str | None, is_dir: bool) -> None:
        path = self.relative(src, is_dir)
        dest_path = self.relative(dest, is_dir) if dest else None
        if kind == "moved":
            if path is None:
                if dest_path is None:
                    return
                kind, path, dest_path = "created", dest_path, None
            elif dest_path is None:
                kind = "deleted"
        elif path is None:
            return
        with self._lock:
            self._batch.add(kind, path, is_dir, dest_path)

    def flush_forever(self) -> None:
        wait = BATCH_SECONDS
        while True:
            time.sleep(wait)
            with self._lock:
                changes, refresh = self._batch.take()
            self.hidden = WorkspaceIgnore(self.root)  # its time for .gitignore files is a batch's
            wait = BURST_SECONDS if refresh else BATCH_SECONDS
            if changes or refresh:
                line = {"changes": changes, **({"refresh": refresh} if refresh else {})}
                sys.stdout.write(json.dumps(line) + "\n")
                sys.stdout.flush()


def _watch(root: Path) -> None:
    from watchdog.events import FileSystemEvent, FileSystemEventHandler
    from watchdog.observers import Observer

    batcher = _Batcher(root)
    kinds = {"created": "created", "modified": "modified", "deleted": "deleted", "moved": "moved"}

    class Handler(FileSystemEventHandler):
        def on_any_event(self, event: FileSystemEvent) -> None:
            kind = kinds.get(event.event_type)
            if kind is None or (kind == "modified" and event.is_directory):
                return
            dest = getattr(event, "dest_path", None) or None
            batcher.add(
                kind,
                os.fsdecode(event.src_path),
                os.fsdecode(dest) if dest else None,
                event.is_directory,
            )

    observer = Observer()
    observer.schedule(Handler(), str(root), recursive=True)
    observer.start()
    sys.stdout.write(json.dumps({"ready": True}) + "\n")
    sys.stdout.flush()
    threading.Thread(target=_exit_with_parent, daemon=True).start()
    batcher.flush_forever()


def _exit_with_parent() -> None:
    """The parent holds our stdin open; when it dies we see EOF and go too."""
    sys.stdin.read()
    os._exit(0)


class WorkspaceWatcher:
    """Starts the child and hands each batch to `on_changes(changes, refresh)`."""

    def __init__(
        self,
        root: Path,
        *,
        on_changes: Callable[[list[dict[str, Any]], list[dict[str, Any]]], None],
        start_background_task: Callable[..., Any],
    ) -> None:
        self.root, self.on_changes = root, on_changes
        self._start_task = start_background_task
        self._process: subprocess.Popen[bytes] | None = None
        self._stopping = False
        self.ready = threading.Event()

    def start(self) -> None:
        """Start the child process and the background task that reads it."""
        argv = [sys.executable, "-m", "modules.workspace.file_watcher", str(self.root)]
        self._process = subprocess.Popen(
            argv,
            cwd=PROGRAM_DIR,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        self._start_task(self._read)

    def _read(self) -> None:
        process = self._process
        assert process is not None and process.stdout is not None
        for line in process.stdout:
            try:
                message = json.loads(line)
            except ValueError:
                log.warning(
                    "ignored a malformed watcher line",
                    extra={"fields": {"line": line[:200].decode("utf-8", "replace")}},
                )
                continue
            if message.get("ready"):
                self.ready.set()
            elif message.get("changes") or message.get("refresh"):
                self._deliver(message.get("changes", []), message.get("refresh", []))
        if not self._stopping:
            log.error(
                "the workspace watcher stopped: live file-tree updates are off",
                extra={"fields": {"exit_code": process.wait()}},
            )

    def _deliver(self, changes: list[dict[str, Any]], refresh: list[dict[str, Any]]) -> None:
        try:
            self.on_changes(changes, refresh)
        except Exception:
            log.exception("file-tree update failed")

    def stop(self) -> None:
        """End the child; the reader sees end of file and finishes."""
        self._stopping = True
        process = self._process
        if process is None:
            return
        if process.poll() is None:
            process.kill()
            process.wait()
        if process.stdin is not None:
            with contextlib.suppress(OSError):
                process.stdin.close()


def _main() -> None:
    parser = argparse.ArgumentParser(description="Report workspace changes as JSON lines.")
    parser.add_argument("root")
    args = parser.parse_args()
    _watch(Path(args.root).resolve())


if __name__ == "__main__":
    _main()
