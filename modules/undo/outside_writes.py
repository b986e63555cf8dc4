"""Writes a person made while a task's command ran (the page's editor saves): not the command's.

A command's changes are found by comparing the workspace before and after it (a snapshot), so
whatever changed meanwhile counts as the command's, and undoing its task would put the earlier
state back over a person's save. A save is noted against every snapshot pending then, and left
out of that command's changes while the path still holds what the person wrote (a command that
wrote it again after them changed it too).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

from modules.undo.blob_store import State
from modules.undo.conflicts import state_now
from modules.workspace.paths import Workspace


class OutsideWrites:
    """The paths a person wrote since each pending snapshot, with the state they left."""

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace
        self._lock = threading.Lock()
        self._by_snapshot: dict[int, dict[str, State]] = {}

    def note(self, snapshots: Iterable[int], rel: str) -> None:
        """A person wrote `rel` while the snapshots `snapshots` (ids) were pending."""
        state = state_now(self.workspace, rel)
        with self._lock:
            for key in snapshots:
                self._by_snapshot.setdefault(key, {})[rel] = state

    def not_theirs(self, snapshot: int, changed: list[str]) -> list[str]:
        """`changed` without the paths that still hold what a person wrote since `snapshot`."""
        with self._lock:
            written = self._by_snapshot.get(snapshot, {})
        return [
            rel
            for rel in changed
            if rel not in written or state_now(self.workspace, rel) != written[rel]
        ]

    def forget(self, snapshot: int) -> None:
        """The snapshot is done with: its notes go."""
        with self._lock:
            self._by_snapshot.pop(snapshot, None)
