"""Live workspace changes: a watchdog observer in a child process, batched, read as JSON lines.

The observer runs in its own process because eventlet's monkey patching breaks watchdog's
threads; the parent only reads lines from a pipe, which works the same under both async modes.
The child has MEMORY_BYTES of address space (it holds a watch per folder of a workspace tasks
write). It ends, saying why in a last `{"stopped": REASON}` line, when a folder cannot be
watched for want of inotify watches (watchdog leaves that unsaid below the root) or its
observer stops; the parent then tells `on_stopped`, as it does when the child dies.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
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
from utils.workers import limit_self

log = logging.getLogger(__name__)

BATCH_SECONDS = 0.1
BURST_SECONDS = 1.0  # after a batch that had folders folded: a burst is going on
MEMORY_BYTES = 1024 * 1024 * 1024  # ~400 MB of threads and the interpreter, 600 B a folder
_OUT_OF_WATCHES = (errno.ENOSPC, errno.EMFILE, errno.ENOMEM)


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

    def flush_forever(self, stopped: Callable[[], str | None]) -> str:
        """Write each batch until `stopped` gives a reason; that reason, after the last one."""
        wait = BATCH_SECONDS
        while True:
            time.sleep(wait)
            reason = stopped()
            with self._lock:
                changes, refresh = self._batch.take()
            self.hidden = WorkspaceIgnore(self.root)  # its time for .gitignore files is a batch's
            wait = BURST_SECONDS if refresh else BATCH_SECONDS
            if changes or refresh:
                line = {"changes": changes, **({"refresh": refresh} if refresh else {})}
                _write(line)
            if reason is not None:
                return reason


def _write(line: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(line) + "\n")
    sys.stdout.flush()


def _watch(root: Path) -> None:
    from watchdog.events import FileSystemEvent, FileSystemEventHandler
    from watchdog.observers.api import BaseObserver
    from watchdog.observers.inotify import InotifyEmitter
    from watchdog.observers.inotify_c import InotifyFD, Mask, WatchCallback, WatchDescriptor

    class Watches(InotifyFD):
        """watchdog's inotify instance, remembering why a folder could not be watched when
        watches ran out (watchdog goes on without it)."""

        ran_out: str | None = None

        def add_callback(
            self, path: bytes, mask: Mask, callback: WatchCallback, id_: Any
        ) -> WatchDescriptor:
            try:
                return super().add_callback(path, mask, callback, id_)
            except OSError as exc:
                if exc.errno in _OUT_OF_WATCHES and self.ran_out is None:
                    self.ran_out = f"{os.fsdecode(path)} could not be watched: {exc.strerror}"
                raise

    class Observer(BaseObserver):
        """watchdog's InotifyObserver on our inotify instance."""

        def __init__(self, watches: Watches) -> None:
            super().__init__(InotifyEmitter, inotify_fd=watches)
            self.watches = watches

        def on_thread_stop(self) -> None:
            super().on_thread_stop()
            self.watches.stop()
            self.watches.join()

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

    watches = Watches()
    watches.start()
    observer = Observer(watches)
    observer.schedule(Handler(), str(root), recursive=True)
    try:
        observer.start()
    except OSError as exc:
        _write({"stopped": f"{root} could not be watched: {exc.strerror}"})
        os._exit(1)
    _write({"ready": True})
    threading.Thread(target=_exit_with_parent, daemon=True).start()

    def stopped() -> str | None:
        if watches.ran_out is not None:
            return f"inotify watches ran out ({watches.ran_out}); raise fs.inotify.max_user_watches"
        if not observer.is_alive() or not all(e.is_alive() for e in observer.emitters):
            return "its observer stopped"
        return None

    _write({"stopped": batcher.flush_forever(stopped)})
    os._exit(1)


def _exit_with_parent() -> None:
    """The parent holds our stdin open; when it dies we see EOF and go too."""
    sys.stdin.read()
    os._exit(0)


class WorkspaceWatcher:
    """Starts the child and hands each batch to `on_changes(changes, refresh)`; if the child
    ends by itself, `on_stopped(why)` is told (the tree then no longer follows changes)."""

    def __init__(
        self,
        root: Path,
        *,
        on_changes: Callable[[list[dict[str, Any]], list[dict[str, Any]]], None],
        start_background_task: Callable[..., Any],
        on_stopped: Callable[[str], None] | None = None,
    ) -> None:
        self.root, self.on_changes, self.on_stopped = root, on_changes, on_stopped
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
            start_new_session=True,  # a terminal's Ctrl-C is the server's to handle
        )
        self._start_task(self._read)

    def _read(self) -> None:
        process = self._process
        assert process is not None and process.stdout is not None
        why = ""
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
            elif message.get("stopped"):
                why = str(message["stopped"])
            elif message.get("changes") or message.get("refresh"):
                self._deliver(message.get("changes", []), message.get("refresh", []))
        if self._stopping:
            return
        code = process.wait()
        why = why or f"its process ended (exit code {code})"
        log.error(
            "the workspace watcher stopped: live file-tree updates are off",
            extra={"fields": {"exit_code": code, "why": why}},
        )
        if self.on_stopped is not None:
            self.on_stopped(why)

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
    limit_self(MEMORY_BYTES, None)
    _watch(Path(args.root).resolve())


if __name__ == "__main__":
    _main()
