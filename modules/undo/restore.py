"""Undoing a task's recorded paths: what it would change (the preview), then putting them
back: clear the way deepest first, recreate shallowest first, then folder modes; what cannot
be put back is said, path by path."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any, Literal

from modules.results import ToolError
from modules.undo.blob_store import BlobStore, Stat, State, sha256_at
from modules.workspace.paths import PathOutsideWorkspace, Workspace
from protocol.event_values import FileChange

UndoAction = Literal["remove", "restore", "lost"]
_OUTSIDE = "a folder on its way now leads outside the workspace"


@dataclass(frozen=True)
class Conflict:
    """A path changed since its task, which undo leaves as it is (see undo_conflicts): why,
    what overwriting it would do, and the later task that changed it, if one did."""

    path: str
    action: UndoAction
    reason: str
    later_task: str | None = None

    def to_wire(self) -> dict[str, Any]:
        """The conflict as acks and previews carry it."""
        wire: dict[str, Any] = {"path": self.path, "action": self.action, "reason": self.reason}
        if self.later_task:
            wire["later_message_id"] = self.later_task
        return wire


@dataclass
class UndoResult:
    """What an undo did: the paths put back, the ones it could not (`path: why`), the
    conflicts it left as they are, a summary."""

    task_id: str | None
    restored: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    message: str = ""
    changes: list[FileChange] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)  # of `restored`: made by the task, now gone
    conflicts: list[Conflict] = field(default_factory=list)


@dataclass
class UndoPreview:
    """What undoing a task would do to each path that differs from before it: `remove` one
    the task made, `restore` one it changed or deleted; `lost`: its old state was not kept.
    `conflicts`: the paths changed since the task, which it leaves unless told to overwrite."""

    task_id: str | None
    files: list[tuple[str, UndoAction]] = field(default_factory=list)
    undone: bool = False
    conflicts: list[Conflict] = field(default_factory=list)


def kind_of(ws: Workspace, rel: str) -> str:
    st = ws.lstat(rel)
    if st is None:
        return "missing"
    info = Stat.of(st)
    return info.kind if info else "other"


def action_for(ws: Workspace, rel: str, before: State) -> UndoAction | None:
    """What undo would do to `rel` to put back its state `before`; None: it holds that now."""
    if before["kind"] == "lost":
        return "lost"
    try:
        now = kind_of(ws, rel)
        if now == before["kind"] == "file":
            info = ws.lstat(rel)
            same = (
                info is not None
                and info.st_size == before["size"]
                and (info.st_mode & 0o7777) == before["mode"]
                and sha256_at(ws, rel) == before["blob"]
            )
        elif now == before["kind"] == "symlink":
            same = ws.readlink(rel) == before["target"]
        else:
            same = now == before["kind"]
    except (OSError, ToolError, PathOutsideWorkspace):
        return "restore"
    if same:
        return None
    return "remove" if before["kind"] == "missing" else "restore"


class Restore:
    """One undo run: clear the way deepest first, recreate shallowest first, then modes;
    the paths in `leave` (conflicts) are not touched."""

    def __init__(
        self,
        workspace: Workspace,
        blobs: BlobStore,
        entries: dict[str, State],
        leave: Collection[Conflict] = (),
    ) -> None:
        self.ws = workspace
        self.root = workspace.root
        self.blobs = blobs
        self.entries = entries
        self.leave = {conflict.path: conflict for conflict in leave}
        self.order = sorted(entries, key=lambda rel: (rel.count("/"), rel))
        self.skipped: dict[str, str] = {}
        self.changes: list[FileChange] = []

    def run(self, task_id: str) -> UndoResult:
        for rel in reversed(self.order):
            self._guarded(rel, self._clear)
        for rel in self.order:
            if self.skipped.get(rel) == _OUTSIDE:  # the link on its way may be cleared by now
                del self.skipped[rel]
            if rel not in self.skipped:
                self._guarded(rel, self._create)
        for rel in reversed(self.order):
            if rel not in self.skipped and self.entries[rel]["kind"] == "dir":
                self._guarded(rel, self._folder_mode)
        restored = sorted({change.path for change in self.changes})
        removed = sorted(
            {
                c.path
                for c in self.changes
                if c.event == "deleted" and self.entries[c.path]["kind"] == "missing"
            }
        )
        skipped = [f"{rel}: {why}" for rel, why in sorted(self.skipped.items())]
        conflicts = sorted(self.leave.values(), key=lambda c: c.path)
        message = f"Undid task {task_id}: restored {len(restored)} path(s)"
        if removed:
            message += f", removing the {len(removed)} it had created"
        if skipped:
            message += f"; {len(skipped)} could not be restored"
        if conflicts:
            message += f"; {len(conflicts)} changed since the task and were left as they are"
        return UndoResult(
            task_id, restored, skipped, message + ".", self.changes, removed, conflicts
        )

    def _guarded(self, rel: str, step: Callable[[str, State], None]) -> None:
        state = self.entries[rel]
        if rel in self.leave:
            return
        if state["kind"] == "lost":
            self.skipped[rel] = f"not kept before the change ({state['reason']})"
            return
        path = self.root / rel
        parent = os.path.realpath(path.parent)
        if parent != str(self.root) and not parent.startswith(f"{self.root}{os.sep}"):
            self.skipped[rel] = _OUTSIDE
            return
        try:
            step(rel, state)
        except PathOutsideWorkspace:
            self.skipped[rel] = _OUTSIDE
        except (OSError, ValueError, ToolError) as exc:
            self.skipped[rel] = f"could not be restored: {exc}"

    def _clear(self, rel: str, state: State) -> None:
        now = kind_of(self.ws, rel)
        if now in ("missing", state["kind"]):
            return
        if now == "dir":
            try:
                self.ws.rmdir(rel)
            except OSError:
                self.skipped[rel] = self._not_empty(rel)
                return
        else:
            self.ws.unlink(rel)
        self.changes.append(FileChange("deleted", rel, is_dir=now == "dir"))

    def _not_empty(self, rel: str) -> str:
        kept = next((p for p in sorted(self.leave) if p.startswith(f"{rel}/")), None)
        if kept is None:
            return "folder is not empty: it holds files this task did not make"
        return f"folder is not empty: it holds {kept}, changed since the task"

    def _create(self, rel: str, state: State) -> None:
        kind, now = state["kind"], kind_of(self.ws, rel)
        if kind == "missing":
            return
        event: Literal["created", "modified"] = "created" if now == "missing" else "modified"
        if kind == "dir":
            if now == "dir":
                return
            self.ws.makedirs(rel)
        elif kind == "symlink":
            if now == "symlink" and self.ws.readlink(rel) == state["target"]:
                return
            if now != "missing":
                self.ws.unlink(rel)
            self.ws.makedirs(rel.rpartition("/")[0])
            self.ws.symlink(state["target"], rel)
        elif not self._put_file(rel, state, now):
            return
        self.changes.append(FileChange(event, rel, is_dir=kind == "dir"))

    def _put_file(self, rel: str, state: State, now: str) -> bool:
        """Write the kept file back; False when it is already there as it was."""
        info = self.ws.lstat(rel) if now == "file" else None
        if info and info.st_size == state["size"] and sha256_at(self.ws, rel) == state["blob"]:
            if (info.st_mode & 0o7777) == state["mode"]:
                return False
            self.ws.chmod(rel, state["mode"])
            return True
        self.ws.makedirs(rel.rpartition("/")[0])
        if not self.blobs.path(state["blob"]).exists():
            raise ValueError("its kept copy is missing from the data folder")
        self.blobs.restore(state["blob"], self.ws, rel, state["mode"])
        return True

    def _folder_mode(self, rel: str, state: State) -> None:
        info = self.ws.lstat(rel)
        if info and stat.S_ISDIR(info.st_mode) and stat.S_IMODE(info.st_mode) != state["mode"]:
            self.ws.chmod(rel, state["mode"])
            if not any(change.path == rel for change in self.changes):
                self.changes.append(FileChange("modified", rel, is_dir=True))
