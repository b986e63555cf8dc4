"""Undo: before a task first changes a path, keep what was there; undoing puts it back.

A task is one user message's run; its id is that message's id. Its manifest, in
`DATA_DIR/undo/tasks/` (see manifests), says what each path it changed held before;
file contents live once, by SHA-256, in `DATA_DIR/undo/blobs/`. The newest KEEP_TASKS
journals of a conversation are kept; blobs that neither they nor the file index
(`DATA_DIR/undo/index.sqlite`, see index) name then go.

File tools call `before_change` / `before_move`. Commands cannot say what they touch, so the
workspace is scanned before and after each one (the index gives unchanged files' hashes, and
their bytes are in the blob store already, so nothing is read or copied for them); the
built-in skipped folders of modules.workspace.ignore (`.git`: git keeps its own history;
virtualenvs, node_modules, caches: tools regenerate them) are left out of those scans, but
.gitignore'd paths are not (a command may delete build outputs), and files over the size
limit are reported, not kept. Files the index does not know yet (a new workspace) are kept
before the command's scan ends, by the baseline child the fronts start when they open the
workspace (modules.undo.baseline; `python -m modules.undo.journal DATA_DIR WORKSPACE` runs
it), or else by the snapshot itself. When a task ends, `finish` records the state it left
each path in (hashes, no copies); undo leaves every path changed since then as it is, and
says so, unless told to overwrite it (conflicts). Undo removes folders the task created only
when they are empty again, so files the user put there stay; it never follows a link out of
the workspace.
"""

from __future__ import annotations

import functools
import logging
import sys
import threading
import time
from collections.abc import Callable, Collection
from pathlib import Path

from modules.sandbox.disk_floor import Floor
from modules.undo.baseline import BASELINE_MEMORY_BYTES, Baseline
from modules.undo.blob_store import BLOB_LIMIT_BYTES, BlobStore, State, scan, scan_tops
from modules.undo.conflicts import find_conflicts, overwritten, state_now, with_folders
from modules.undo.index import FileIndex
from modules.undo.keeper import Keeper, Snapshot
from modules.undo.manifests import ID, Manifests, load, mark_undone, task_of
from modules.undo.outside_writes import OutsideWrites
from modules.undo.restore import (
    Conflict,
    Restore,
    UndoAction,
    UndoPreview,
    UndoResult,
    action_for,
    kind_of,
)
from modules.workspace.ignore import SKIPPED_DIRS
from modules.workspace.paths import Workspace
from utils.files import directory_lock
from utils.workers import limit_self

log = logging.getLogger(__name__)

KEEP_TASKS = 50


class TaskJournal:
    """The undo record of one task (one user message's run); safe to use from any thread."""

    def __init__(self, owner: UndoJournal, conversation_id: str, task_id: str) -> None:
        self._owner = owner
        self.conversation_id = conversation_id
        self.task_id = task_id

    def before_change(self, path: Path) -> None:
        """Keep the state of `path` (and all under a folder) unless this task already did."""
        self._owner.settle()
        self._owner._keep(self, path)

    def before_move(self, source: Path, dest: Path) -> None:
        """Keep both sides of a rename: the source tree and its future place under `dest`."""
        self._owner.settle()
        self._owner._keep(self, source, mirror=dest)

    def snapshot(self) -> Snapshot:
        """Scan the workspace before a command runs: stats, and hashes from the index."""
        self._owner.settle()
        return self._owner._snapshot()

    def record_changes_since(self, snapshot: Snapshot) -> list[str]:
        """Keep the earlier state of every path changed since `snapshot`; returns them."""
        self._owner.settle()
        return self._owner._record_since(self, snapshot)

    def record_changes_later(self, snapshot: Snapshot) -> None:
        """`record_changes_since` in a background thread, so a command's result need not
        wait for the scan after it: every later use of the journal waits for it instead."""
        self._owner._record_later(self, snapshot)

    def finish(self, paths: Collection[Path] | None = None) -> None:
        """Record the state the task leaves each path it changed in (or only `paths`, changed
        after it ended), which undo compares them with: call it when the task ends."""
        self._owner.settle()
        self._owner._finish(self, paths)


class UndoJournal:
    """Every task's undo record, for all conversations of one workspace."""

    def __init__(
        self,
        data_dir: Path,
        workspace: Workspace,
        *,
        keep_tasks: int = KEEP_TASKS,
        max_file_bytes: int = BLOB_LIMIT_BYTES,
        floor: Floor | None = None,
    ) -> None:
        self.workspace = workspace
        self.root = Path(data_dir) / "undo"
        floor = floor or Floor()
        self.blobs = BlobStore(self.root / "blobs", max_bytes=max_file_bytes, floor=floor)
        index = FileIndex(self.root / "index.sqlite", str(workspace.root))
        self.keeper = Keeper(self.blobs, index)
        self.manifests = Manifests(self.root / "tasks")
        self.keep_tasks = keep_tasks
        self._lock = threading.RLock()
        self._pending: dict[int, Snapshot] = {}
        self._outside = OutsideWrites(workspace)
        # Held from a command's end until its changes are recorded (a plain Lock: the
        # recording thread releases what the command's thread took).
        self._recording = threading.Lock()
        self.baseline = Baseline(Path(data_dir), workspace.root, floor)

    def outside_write(self, rel: str) -> None:
        """A person wrote `rel` (the page's editor): no command running now takes it as its
        change, so no undo of its task puts it back."""
        pending = self._pending.copy()  # one step under the GIL: it changes in other threads
        if pending:
            self._outside.note(pending, rel)

    def settle(self) -> None:
        """Wait until the changes of every command that ended are recorded."""
        with self._recording:
            pass

    def start_baseline(self) -> None:
        """Fill the index and blob store now, in a child process (see undo_baseline), so
        that the first command need not copy the workspace before it runs; and read the
        index meanwhile (the first snapshot reads it again only if the child wrote)."""
        self.baseline.start()
        with self._lock:
            _ = self.keeper.index.stats

    def build_baseline(self) -> None:
        """Keep every path the index lacks: what the baseline child runs."""
        with self._lock:
            self._scan_and_keep()

    def close(self) -> None:
        """Record what ended commands changed; stop a baseline child that still runs (what it
        kept so far stays kept)."""
        self.settle()
        self.baseline.stop()

    def task(self, conversation_id: str, task_id: str) -> TaskJournal:
        """The journal of one task; nothing is written until its first change."""
        for value in (conversation_id, task_id):
            if not ID.match(value):
                raise ValueError(f"not a valid id for an undo journal: {value!r}")
        return TaskJournal(self, conversation_id, task_id)

    def undoable(self, conversation_id: str) -> list[str]:
        """Ids of the conversation's tasks whose changes are not undone yet, newest first."""
        self.settle()
        with self._lock:
            manifests = reversed(self.manifests.of(conversation_id))
            return [task_of(p) for p in manifests if not load(p).get("undone_ns")]

    def preview(self, conversation_id: str, task_id: str | None = None) -> UndoPreview:
        """What `undo` would change now (default: the newest task with a journal)."""
        self.settle()
        with self._lock:
            where = self.manifests.newest(conversation_id, task_id)
            if where is None:
                return UndoPreview(task_id)
            manifest = load(where)
            if manifest.get("undone_ns"):
                return UndoPreview(manifest["task_id"], undone=True)
            actions = self._actions(manifest["entries"])
            conflicts = self._conflicts(where, manifest, actions)
            files = [(rel, action) for rel, action in actions.items() if rel not in conflicts]
            shown = sorted(conflicts.values(), key=lambda c: c.path)
            return UndoPreview(manifest["task_id"], files, conflicts=shown)

    def forget(self, conversation_id: str) -> None:
        """Drop every undo journal of a conversation (it is being deleted), and the blobs
        nothing else needs."""
        self.settle()
        with self._lock:
            if not ID.match(conversation_id):
                return
            self.manifests.forget(conversation_id)
            self._collect_blobs()

    def undo(
        self,
        conversation_id: str,
        task_id: str | None = None,
        overwrite: bool | Collection[str] = False,
    ) -> UndoResult:
        """Put back every path the task changed (default: the newest task with a journal),
        but those changed since it ended unless `overwrite` (all, or these paths) says so."""
        self.settle()
        with self._lock:
            where = self.manifests.newest(conversation_id, task_id)
            if where is None:
                what = f"message {task_id}" if task_id else "this conversation"
                return UndoResult(
                    task_id, message=f"Nothing to undo: no file changes are recorded for {what}."
                )
            manifest = load(where)
            tid = manifest["task_id"]
            if manifest.get("undone_ns"):
                return UndoResult(tid, message=f"Task {tid} was already undone; nothing changed.")
            entries = manifest["entries"]
            conflicts = self._conflicts(where, manifest, self._actions(entries))
            forced = overwritten(conflicts, overwrite)
            left = [c for rel, c in conflicts.items() if rel not in forced]
            result = Restore(self.workspace, self.blobs, entries, left).run(tid)
            mark_undone(where, manifest, with_folders(c.path for c in result.conflicts))
        log.info(
            "task undone",
            extra={
                "fields": {
                    "conversation_id": conversation_id,
                    "task_id": tid,
                    "restored": len(result.restored),
                    "skipped": len(result.skipped),
                    "conflicts": len(result.conflicts),
                    "overwritten": len(forced),
                }
            },
        )
        return result

    def _actions(self, entries: dict[str, State]) -> dict[str, UndoAction]:
        """What undo would do to each path of `entries` that differs from its state there."""
        return {
            rel: action
            for rel in sorted(entries)
            if (action := action_for(self.workspace, rel, entries[rel])) is not None
        }

    def _conflicts(
        self, where: Path, manifest: dict, actions: dict[str, UndoAction]
    ) -> dict[str, Conflict]:
        changed_later = functools.cache(lambda: self.manifests.changed_after(where))
        after = manifest.get("after", {})
        return find_conflicts(self.workspace, actions, after, lambda rel: changed_later().get(rel))

    # --- what TaskJournal calls -----------------------------------------------------------

    def _keep(self, journal: TaskJournal, path: Path, mirror: Path | None = None) -> None:
        ws = self.workspace
        source = ws.relative(path)

        def fill(entries: dict[str, State]) -> None:
            tree = [source]
            if kind_of(ws, source) == "dir":
                tree += sorted(scan(ws, (), top=source))
            for rel in tree:
                if rel not in entries:
                    entries[rel] = self.keeper.state_of(ws, rel)
            if mirror is not None:
                dest = ws.relative(mirror)
                for rel in tree:
                    moved = dest + rel[len(source) :]
                    if moved not in entries:
                        entries[moved] = self.keeper.state_of(ws, moved)

        self._update(journal, fill)
        with self._lock:
            self.keeper.index.flush()

    def _finish(self, journal: TaskJournal, paths: Collection[Path] | None) -> None:
        ws = self.workspace
        only = None if paths is None else {ws.relative(p) for p in paths}
        with self._lock:
            if only is None and self._changed_nothing(journal):
                return
            try:
                self.manifests.record_after(
                    journal.conversation_id, journal.task_id, lambda rel: state_now(ws, rel), only
                )
            except (OSError, ValueError, KeyError):  # then undo counts its paths as conflicts
                log.exception("what a task left could not be recorded for undo")

    def _changed_nothing(self, journal: TaskJournal) -> bool:
        """Drop the journal of a task that left every path as it found it (its writes failed,
        or it put back what it changed), so that no undo is offered that would do nothing."""
        where = self.manifests.newest(journal.conversation_id, journal.task_id)
        if where is None:
            return True
        manifest = load(where)
        if manifest.get("undone_ns") or self._actions(manifest["entries"]):
            return False
        where.unlink(missing_ok=True)
        return True

    def _snapshot(self) -> Snapshot:
        self.baseline.wait()
        with self._lock:
            snap = self._scan_and_keep()
            self._pending[id(snap)] = snap
            return snap

    def _scan_and_keep(self) -> Snapshot:
        started = time.time_ns()
        stats = scan(self.workspace, SKIPPED_DIRS)
        return self.keeper.snapshot(self.workspace, stats, started)

    def _record_since(self, journal: TaskJournal, snap: Snapshot) -> list[str]:
        with self._lock:
            try:
                after = scan(self.workspace, SKIPPED_DIRS)
                changed = self.keeper.changed(self.workspace, snap, after)
                changed = self._outside.not_theirs(id(snap), changed)

                def fill(entries: dict[str, State]) -> None:
                    for rel in changed:
                        if rel not in entries:
                            entries[rel] = self.keeper.old_state(snap, rel)

                self._update(journal, fill)
            finally:
                self._done_with(snap)
        return changed

    def _record_later(self, journal: TaskJournal, snap: Snapshot) -> None:
        self._recording.acquire()
        try:
            threading.Thread(
                target=self._record_then_release,
                args=(journal, snap),
                name="undo-record",
                daemon=True,
            ).start()
        except BaseException:
            self._recording.release()
            raise

    def _record_then_release(self, journal: TaskJournal, snap: Snapshot) -> None:
        try:
            self._record_since(journal, snap)
        except Exception:
            log.exception("the changes of a command could not be recorded for undo")
        finally:
            self._recording.release()

    # --- what a hold of a few paths calls (see config_hold) --------------------------------

    def keep_paths(self, tops: Collection[str]) -> Snapshot:
        """Keep what the paths `tops` hold now (each a file, or a folder with all under it) and
        scan nothing else; what the snapshot keeps stays until `release`."""
        started = time.time_ns()
        with self._lock:
            stats = scan_tops(self.workspace, tops, SKIPPED_DIRS)
            snap = self.keeper.snapshot_of(self.workspace, stats, started)
            self._pending[id(snap)] = snap
            return snap

    def changed_paths(self, snap: Snapshot, tops: Collection[str]) -> list[str]:
        """The paths under `tops` whose state differs from the one `snap` kept."""
        with self._lock:
            after = scan_tops(self.workspace, tops, SKIPPED_DIRS)
            changed = self.keeper.changed(self.workspace, snap, after)
            return self._outside.not_theirs(id(snap), changed)

    def put_back(self, snap: Snapshot, paths: Collection[str]) -> UndoResult:
        """Put `paths` back as `snap` kept them, once the ended commands' changes are recorded
        (a task's journal keeps the state before its command, so its undo still holds)."""
        self.settle()
        with self._lock:
            entries = {rel: self.keeper.old_state(snap, rel) for rel in paths}
            return Restore(self.workspace, self.blobs, entries).run("")

    def release(self, snap: Snapshot) -> None:
        """Let go of what `keep_paths` kept for `snap`."""
        with self._lock:
            self._done_with(snap)

    def _done_with(self, snap: Snapshot) -> None:
        self._pending.pop(id(snap), None)
        self._outside.forget(id(snap))

    # --- manifests ------------------------------------------------------------------------

    def _update(self, journal: TaskJournal, fill: Callable[[dict[str, State]], None]) -> None:
        """Add entries through `fill`; prune older journals when this task's is new."""
        with self._lock:
            if self.manifests.update(journal.conversation_id, journal.task_id, fill):
                self._prune(journal.conversation_id)

    def _prune(self, conversation_id: str) -> None:
        """Drop journals beyond the newest `keep_tasks`, then blobs nothing refers to."""
        pruned = self.manifests.prune(conversation_id, self.keep_tasks)
        if not pruned:
            return
        removed = self._collect_blobs()
        log.info(
            "undo journals pruned",
            extra={
                "fields": {
                    "conversation_id": conversation_id,
                    "journals": pruned,
                    "blobs": removed,
                }
            },
        )

    def _collect_blobs(self) -> int:
        """Remove the blobs no journal, index entry or pending snapshot names; how many."""
        if self.baseline.busy():
            return 0  # a baseline keeps blobs that its index names only once it writes it
        indexed = self.keeper.live()
        if indexed is None:
            return 0  # the index cannot be read: which blobs it needs is not known
        pending = (snap.digests.values() for snap in self._pending.values())
        return self.blobs.collect(indexed.union(*pending, self.manifests.blobs()))


def _build_baseline(argv: list[str]) -> int:
    """The baseline child (see undo_baseline): DATA_DIR WORKSPACE FLOOR_BYTES FLOOR_PERCENT,
    built under its lock within BASELINE_MEMORY_BYTES."""
    limit_self(BASELINE_MEMORY_BYTES, None)
    floor = Floor(int(argv[2]), float(argv[3]))
    journal = UndoJournal(Path(argv[0]), Workspace(Path(argv[1])), floor=floor)
    journal.root.mkdir(parents=True, exist_ok=True)
    with directory_lock(journal.root):
        journal.build_baseline()
    return 0


if __name__ == "__main__":
    sys.exit(_build_baseline(sys.argv[1:]))
