"""Undo journals on disk: one JSON manifest per task, kept per conversation.

`DATA_DIR/undo/tasks/CONVERSATION_ID/NANOSECONDS_TASK_ID.json` is one task's manifest:
`version`, `conversation_id`, `task_id`, `entries` (workspace-relative path -> its state
before the task, see blob_store), `after` (path -> the state the task left it in, recorded
when it ends, see undo_conflicts) and, once undone, `undone_ns`; an undo that left conflicts
keeps only their entries (and the folders above them), to be undone later. It is replaced
atomically whenever it changes; the names sort oldest first. Callers hold their journal's
lock.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from collections.abc import Callable, Collection
from pathlib import Path

from modules.undo.blob_store import State
from utils.files import atomic_write

ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$")


class Manifests:
    """The task manifests of every conversation, one folder each under `root`."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def of(self, conversation_id: str, task_id: str | None = None) -> list[Path]:
        """The conversation's manifests (of one task, when given), oldest first."""
        if not ID.match(conversation_id):
            return []
        folder = self._folder(conversation_id)
        try:
            names = sorted(n for n in os.listdir(folder) if n.endswith(".json"))
        except FileNotFoundError:
            return []
        found = [folder / name for name in names]
        if task_id is not None:
            found = [p for p in found if task_of(p) == task_id]
        return found

    def newest(self, conversation_id: str, task_id: str | None = None) -> Path | None:
        """The newest manifest of the conversation (of one task, when given)."""
        found = self.of(conversation_id, task_id)
        return found[-1] if found else None

    def update(
        self, conversation_id: str, task_id: str, fill: Callable[[dict[str, State]], None]
    ) -> bool:
        """Add entries through `fill`, writing the manifest only when it grew; whether a new
        one was written (a task undone before starts a new one)."""
        found = self.of(conversation_id, task_id)
        where = (
            found[-1]
            if found
            else self._folder(conversation_id) / f"{time.time_ns():020d}_{task_id}.json"
        )
        manifest = load(where) if found else {}
        if not manifest or manifest.get("undone_ns"):
            manifest = {
                "version": 1,
                "conversation_id": conversation_id,
                "task_id": task_id,
                "entries": {},
            }
        entries = manifest["entries"]
        count = len(entries)
        fill(entries)
        if len(entries) == count:
            return False
        save(where, manifest)
        return not found

    def prune(self, conversation_id: str, keep: int) -> int:
        """Remove the conversation's manifests beyond the newest `keep`; how many."""
        manifests = self.of(conversation_id)
        excess = manifests[: max(0, len(manifests) - keep)]
        for path in excess:
            path.unlink(missing_ok=True)
        return len(excess)

    def record_after(
        self,
        conversation_id: str,
        task_id: str,
        state_of: Callable[[str], State],
        only: Collection[str] | None = None,
    ) -> None:
        """Set the `after` state of each path the task changed (or of those in `only`) to
        `state_of(path)`: what it holds now."""
        where = self.newest(conversation_id, task_id)
        if where is None:
            return
        manifest = load(where)
        if manifest.get("undone_ns"):
            return
        entries = manifest["entries"]
        after = manifest.setdefault("after", {})
        for rel in entries if only is None else entries.keys() & only:
            if entries[rel]["kind"] != "lost":
                after[rel] = state_of(rel)
        save(where, manifest)

    def changed_after(self, manifest: Path) -> dict[str, str]:
        """Path -> the first task after `manifest` (in any conversation) that changed it and
        is not undone."""
        found: dict[str, str] = {}
        later = sorted(
            (p for p in self.root.glob("*/*.json") if p.name > manifest.name), key=lambda p: p.name
        )
        for path in later:
            try:
                other = load(path)
            except (OSError, ValueError):
                continue
            if not other.get("undone_ns"):
                for rel in other.get("entries", {}):
                    found.setdefault(rel, task_of(path))
        return found

    def forget(self, conversation_id: str) -> None:
        """Remove every manifest of the conversation (an id that is not valid names none)."""
        if ID.match(conversation_id):
            shutil.rmtree(self._folder(conversation_id), ignore_errors=True)

    def blobs(self) -> set[str]:
        """The hashes of the blobs any readable manifest names."""
        live: set[str] = set()
        for path in self.root.glob("*/*.json"):
            try:
                entries = load(path)["entries"].values()
            except (OSError, ValueError, KeyError):
                continue
            live.update(e["blob"] for e in entries if "blob" in e)
        return live

    def _folder(self, conversation_id: str) -> Path:
        return self.root / conversation_id


def task_of(manifest: Path) -> str:
    return manifest.stem.partition("_")[2]


def load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def save(path: Path, manifest: dict) -> None:
    atomic_write(path, json.dumps(manifest))


def mark_undone(where: Path, manifest: dict, pending: Collection[str]) -> None:
    """Save the manifest undone; with `pending` paths (conflicts an undo left), only their
    entries instead, for a later undo."""
    if pending:
        for key in ("entries", "after"):
            kept = manifest.get(key, {})
            manifest[key] = {rel: kept[rel] for rel in kept if rel in pending}
    else:
        manifest["undone_ns"] = time.time_ns()
    save(where, manifest)
