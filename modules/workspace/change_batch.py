"""One batch of workspace changes as `file_tree` tells them: each path once, with its net
effect, and a folder that changed too much to list folded into one `refresh` entry.

A program writing a file reports it created and then modified, and a burst of 20,000 files
made and deleted was 5.4 MB of `file_tree` messages to every client; folded, a few kB.
"""

from __future__ import annotations

import itertools
from collections import Counter
from typing import Any

FOLD_ABOVE = 50  # changes under one folder in a batch past which it is refreshed instead
Changes = list[dict[str, Any]]  # as the wire has them: {event, path, is_dir, dest_path?}


def net_event(first: str, last: str) -> str | None:
    """What a path's first and last change in a batch amount to (None: nothing, it was made
    and removed within the batch); `created` stays created, whatever followed."""
    if first == "created":
        return None if last == "deleted" else "created"
    return last


class ChangeBatch:
    """Changes added as they come; `take()` hands the batch out and starts the next."""

    def __init__(self) -> None:
        self._entries: dict[int, dict[str, Any]] = {}  # by key, in the order of last changes
        self._first: dict[int, str] = {}  # each entry's first event in the batch
        self._open: dict[str, int] = {}  # a path's entry that later changes merge into
        self._keys = itertools.count()

    def __len__(self) -> int:
        return len(self._entries)

    def add(self, kind: str, path: str, is_dir: bool, dest_path: str | None = None) -> None:
        if kind == "moved":  # what comes after a move to or from a path follows it
            self._open.pop(path, None)
            self._open.pop(dest_path or "", None)
            change = {"event": kind, "path": path, "is_dir": is_dir, "dest_path": dest_path}
            self._entries[next(self._keys)] = change
            return
        first = kind
        key = self._open.pop(path, None)
        if key is not None:
            first = self._first.pop(key)
            del self._entries[key]
        event = net_event(first, kind)
        if event is None:
            return
        key = next(self._keys)
        self._open[path], self._first[key] = key, first
        self._entries[key] = {"event": event, "path": path, "is_dir": is_dir}

    def take(self, fold_above: int = FOLD_ABOVE) -> tuple[Changes, Changes]:
        """The batch's changes and its folded folders (`{path, count}`), and a new batch."""
        changes = list(self._entries.values())
        self._entries, self._first, self._open = {}, {}, {}
        return fold(changes, fold_above)


def parent(path: str) -> str:
    return path.rpartition("/")[0]


def ancestors(folder: str) -> list[str]:
    """The folder and every folder above it, the root ("") last."""
    found = [folder]
    while folder:
        folder = parent(folder)
        found.append(folder)
    return found


def home(change: dict[str, Any]) -> str:
    """The folder a change is listed in: its parent; a move's, the one holding both ends."""
    folder = parent(change["path"])
    dest = change.get("dest_path")
    if dest is None:
        return folder
    above_dest = set(ancestors(parent(dest)))
    return next(f for f in ancestors(folder) if f in above_dest)


def fold(changes: Changes, fold_above: int) -> tuple[Changes, Changes]:
    """Fold every folder holding more than `fold_above` entries (a folded subfolder counts as
    one), deepest first: its changes leave the list, the folder goes to `refresh` with how
    many it held. A folder inside a folded one is not listed again."""
    homes = [home(change) for change in changes]
    held = Counter(homes)  # entries, a folded subfolder being one
    count = Counter(homes)  # changes, all of them
    folders = {f for h in held for f in ancestors(h)}
    folded: set[str] = set()
    for folder in sorted(folders, key=lambda f: (f.count("/"), bool(f)), reverse=True):
        if held[folder] > fold_above:
            folded.add(folder)
            held[folder] = 1
        if folder:
            held[parent(folder)] += held[folder]
            count[parent(folder)] += count[folder]
    if not folded:
        return changes, []
    covered = {h: any(f in folded for f in ancestors(h)) for h in held}
    kept = [change for change, h in zip(changes, homes, strict=True) if not covered[h]]
    tops = [f for f in folded if not any(a in folded for a in ancestors(f)[1:])]
    return kept, [{"path": f, "count": count[f]} for f in sorted(tops)]
