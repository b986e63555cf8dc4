"""What a conversation's tasks changed in the workspace, from their undo journals: each task's
files with a unified diff per file (the state before it, from the journal's copy, against the
state it left, or what the file holds now), and the sum since the conversation began (the
first state kept of each path against now)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from modules.results import ToolError
from modules.undo.blob_store import State
from modules.undo.conflicts import state_now
from modules.undo.journal import UndoJournal
from modules.undo.manifests import load, task_of
from modules.workspace.text_files import SNIFF_BYTES, unified_diff

SHOWN_BYTES = 1_000_000  # a side larger than this is named, not diffed
DIFF_CHARS = 2_000_000  # of every diff in one answer together

Side = str | None  # a file's text, or None: no file there


@dataclass
class Content:
    """One side of a change: its text (None: no file), or why it cannot be shown."""

    text: Side = None
    note: str | None = None


class Changes:
    """Reads a conversation's journals (oldest first) and the blobs and files they name."""

    def __init__(self, journal: UndoJournal) -> None:
        self.journal = journal
        self.left = DIFF_CHARS

    def by_task(self, conversation_id: str, task_id: str | None = None) -> list[dict[str, Any]]:
        """Each task (or the one named) with the files it changed and their diffs."""
        self.journal.settle()
        tasks = []
        for where in self.journal.manifests.of(conversation_id, task_id):
            manifest = _load(where)
            if manifest is None:
                continue
            after: dict[str, State] = manifest.get("after", {})
            files = [
                self._file(rel, before, after.get(rel))
                for rel, before in sorted(manifest.get("entries", {}).items())
                if before.get("kind") != "dir"
            ]
            tasks.append(
                {
                    "message_id": task_of(where),
                    "undone": bool(manifest.get("undone_ns")),
                    "files": [f for f in files if f is not None],
                }
            )
        return tasks

    def since_start(self, conversation_id: str) -> list[dict[str, Any]]:
        """Every path the conversation's tasks (not undone) changed: its first kept state
        against now, left out where the two are the same."""
        self.journal.settle()
        first: dict[str, State] = {}
        for where in self.journal.manifests.of(conversation_id):
            manifest = _load(where)
            if manifest is None or manifest.get("undone_ns"):
                continue
            for rel, before in manifest.get("entries", {}).items():
                if before.get("kind") != "dir":
                    first.setdefault(rel, before)
        files = (self._file(rel, first[rel], None) for rel in sorted(first))
        return [f for f in files if f is not None]

    def _file(self, rel: str, before: State, after: State | None) -> dict[str, Any] | None:
        """One path's change; None when it holds what it held before."""
        now = after if after is not None else state_now(self.journal.workspace, rel)
        if _same(before, now):
            return None
        old, new = self._before(before), self._after(rel, now)
        status = "added" if old.text is None and old.note is None else "modified"
        if new.text is None and new.note is None:
            status = "deleted"
        entry: dict[str, Any] = {"path": rel, "status": status, "diff": None, "note": None}
        if old.note or new.note:
            entry["note"] = old.note or new.note
            return entry
        text = unified_diff(old.text, new.text, rel)
        if len(text) > self.left:
            entry["note"] = "not shown: the diffs of this answer reached their limit"
        else:
            self.left -= len(text)
            entry["diff"] = text
        return entry

    def _before(self, state: State) -> Content:
        kind = state.get("kind")
        if kind == "file":
            return self._blob(state["blob"], state.get("size", 0))
        return _other(state)

    def _after(self, rel: str, state: State) -> Content:
        kind = state.get("kind")
        if kind != "file":
            return _other(state)
        digest, size = state["sha256"], state.get("size", 0)
        if self.journal.blobs.has(digest):
            return self._blob(digest, size)
        if state_now(self.journal.workspace, rel) != state:
            return Content(note="changed again since: what the task left is not kept")
        if size > SHOWN_BYTES:
            return Content(note=f"too large to show ({size:,} bytes)")
        try:
            return _text(self.journal.workspace.read_bytes(rel, SHOWN_BYTES + 1))
        except (OSError, ToolError) as exc:
            return Content(note=f"could not be read ({exc})")

    def _blob(self, digest: str, size: int) -> Content:
        if size > SHOWN_BYTES:
            return Content(note=f"too large to show ({size:,} bytes)")
        try:
            with open(self.journal.blobs.path(digest), "rb") as handle:
                return _text(handle.read(SHOWN_BYTES + 1))
        except OSError:
            return Content(note="its kept copy is gone")


def _same(before: State, now: State) -> bool:
    if before.get("kind") == "file" and now.get("kind") == "file":
        return before.get("blob") == now.get("sha256") and before.get("mode") == now.get("mode")
    return before == now


def _other(state: State) -> Content:
    kind = state.get("kind")
    if kind == "missing":
        return Content()
    if kind == "symlink":
        return Content(text=f"(a link to {state.get('target')})\n")
    if kind == "dir":
        return Content(text="(a folder)\n")
    return Content(note=f"not kept: {state.get('reason', 'unknown')}")


def _text(data: bytes) -> Content:
    if len(data) > SHOWN_BYTES:
        return Content(note="too large to show")
    if b"\0" in data[:SNIFF_BYTES]:
        return Content(note="binary")
    return Content(text=data.decode("utf-8", "replace"))


def _load(where: Any) -> dict[str, Any] | None:
    try:
        return load(where)
    except (OSError, ValueError):
        return None
