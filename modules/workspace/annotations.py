"""Short notes about workspace files, kept in one JSON file in the data directory."""

from __future__ import annotations

import builtins
import json
import logging
import threading
from pathlib import Path

from utils.files import atomic_write

log = logging.getLogger(__name__)


def _under(key: str, path: str) -> bool:
    return key == path or key.startswith(path + "/")


class AnnotationStore:
    """A note per workspace-relative path; moves and drops follow folders too."""

    def __init__(self, data_dir: Path) -> None:
        self.file = Path(data_dir) / "annotations.json"
        self._lock = threading.Lock()
        self._notes = self._load()

    def _load(self) -> dict[str, str]:
        try:
            data = json.loads(self.file.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            log.warning("annotations file unreadable, starting empty: %s", exc)
            return {}
        if not isinstance(data, dict):
            return {}
        return {str(k): str(v) for k, v in data.items()}

    def _save(self) -> None:
        atomic_write(self.file, json.dumps(self._notes, ensure_ascii=False, indent=1))

    def get(self, path: str) -> str | None:
        """The note on `path`, if any."""
        with self._lock:
            return self._notes.get(path)

    def set(self, path: str, note: str) -> None:
        """Set the note on `path`; an empty note removes it."""
        note = note.strip()
        with self._lock:
            if note:
                self._notes[path] = note
            elif self._notes.pop(path, None) is None:
                return
            self._save()

    def move(self, old: str, new: str) -> None:
        """Carry the notes of `old` (and of everything under it, for a folder) to `new`."""
        with self._lock:
            moved = {k: v for k, v in self._notes.items() if _under(k, old)}
            if not moved:
                return
            for key, note in moved.items():
                del self._notes[key]
                self._notes[new + key[len(old) :]] = note
            self._save()

    def drop(self, path: str) -> None:
        """Forget the notes of `path` and of everything under it."""
        with self._lock:
            gone = [k for k in self._notes if _under(k, path)]
            for key in gone:
                del self._notes[key]
            if gone:
                self._save()

    def all(self) -> dict[str, str]:
        """Every note, by path."""
        with self._lock:
            return dict(self._notes)

    def prune(self, existing: builtins.set[str]) -> int:  # builtins: `set` is a method here
        """Forget notes on paths not in `existing`; returns how many went."""
        with self._lock:
            stale = [k for k in self._notes if k not in existing]
            for key in stale:
                del self._notes[key]
            if stale:
                self._save()
            return len(stale)
