"""What the workspace held before a command: snapshots, and the old content kept for them.

A path whose lstat matches its entry in the file index (undo_index) is trusted unread; any
other file is read, hashed and its bytes put in the blob store (once per distinct content),
then its entry written. So every hash the index names has its blob already (entries follow
their blob, and the journal's blob collection keeps every hash the index names): a command's
snapshot copies nothing, and the old bytes of whatever the command changes are there when it
ends. When nothing changed since the index was written, a snapshot is one scan and one
comparison of two dicts.

Entries are written only for files last modified over RACY_NS before they were read (a newer
one may change again within the same timestamp); those are hashed at every snapshot, and
again after the command. Entries are all dropped when the blob store's folder is gone. A
changed file whose blob went all the same (removed by hand, or by another process's
collection at the wrong moment) is recorded as lost, never as content that undo cannot put
back.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

from modules.results import ToolError
from modules.undo.blob_store import (
    MISSING,
    RACY_NS,
    BlobStore,
    Stat,
    State,
    lost,
    no_gc,
    sha256_at,
)
from modules.undo.index import FileIndex
from modules.workspace.safe_fs import SafeRoot

_FLUSH_SECONDS = 2.0  # while many files are kept, what is done so far is written this often


@dataclass
class Snapshot:
    """The workspace before a command: each path's Stat, and what its state was made of."""

    stats: dict[str, Stat]
    digests: dict[str, str] = field(default_factory=dict)
    links: dict[str, str] = field(default_factory=dict)
    lost: dict[str, str] = field(default_factory=dict)
    racy: set[str] = field(default_factory=set)

    def state(self, rel: str) -> State:
        """The kept state of `rel` when the snapshot was taken."""
        info = self.stats.get(rel)
        if info is None:
            return dict(MISSING)
        if rel in self.lost:
            return lost(self.lost[rel])
        if info.kind == "dir":
            return {"kind": "dir", "mode": info.mode}
        if info.kind == "symlink":
            return {"kind": "symlink", "target": self.links[rel]}
        digest = self.digests.get(rel)
        if digest is None:
            return lost("its content was not kept")
        return {"kind": "file", "blob": digest, "mode": info.mode, "size": info.size}


class Keeper:
    """Keeps the states of workspace paths: bytes in the blob store, stat -> hash in the index."""

    def __init__(self, blobs: BlobStore, index: FileIndex) -> None:
        self.blobs = blobs
        self.index = index
        self._checked = False

    def state_of(self, fs: SafeRoot, rel: str) -> State:
        """The current state of the workspace path `rel`, its content kept when it is a file."""
        try:
            st = fs.lstat(rel)
        except OSError as exc:
            return lost(f"could not be read ({exc.strerror})")
        except ToolError as exc:
            return lost(str(exc))
        return dict(MISSING) if st is None else self.keep(fs, rel, Stat.of(st))

    def keep(self, fs: SafeRoot, rel: str, info: Stat | None, folder: int | None = None) -> State:
        """The state of `rel` as `info` describes it, keeping a file's bytes; `folder`, when
        given, is the fd of the folder holding it."""
        if info is None:
            return lost("not a regular file, folder or symbolic link")
        if info.kind == "dir":
            return {"kind": "dir", "mode": info.mode}
        if info.kind == "file" and info.size > self.blobs.max_bytes:
            limit = self.blobs.max_bytes // (1024 * 1024)
            return lost(f"{info.size:,} bytes, over the {limit} MB limit for undo copies")
        try:
            if folder is not None:
                return self._keep_at(folder, rel, info)
            with fs.parent_of(rel, follow=False) as (fd, _):
                return self._keep_at(fd, rel, info)
        except OSError as exc:
            return lost(f"could not be read ({exc.strerror})")
        except ToolError as exc:
            return lost(str(exc))

    def snapshot(self, fs: SafeRoot, stats: dict[str, Stat], started_ns: int) -> Snapshot:
        """The Snapshot of a scan begun at `started_ns`; reads only paths the index lacks."""
        self._check()
        index = self.index
        index.refresh()
        known = index.stats
        if stats == known:  # nothing changed since it was indexed (and nothing indexed is racy)
            return Snapshot(stats, dict(index.hashes), dict(index.links))
        with no_gc():
            unknown = sorted(rel for rel, _ in stats.items() - known.items())
            gone = known.keys() - stats.keys()
            snap = Snapshot(stats, dict(index.hashes), dict(index.links))
        for rel in gone.union(rel for rel in unknown if rel in known):
            index.drop(rel, started_ns)
        by_folder: dict[str, list[str]] = {}
        for rel in unknown:
            info = stats[rel]
            if info.kind == "dir":
                index.put(rel, info, None)
                continue
            if info.kind == "file" and started_ns - info.mtime_ns < RACY_NS:
                snap.racy.add(rel)
            by_folder.setdefault(rel.rpartition("/")[0], []).append(rel)
        self._keep_all(fs, snap, by_folder)
        index.flush()
        return snap

    def snapshot_of(self, fs: SafeRoot, stats: dict[str, Stat], started_ns: int) -> Snapshot:
        """The Snapshot of the paths of `stats` alone (a part of the workspace), the rest of the
        index left as it is; reads only the files the index lacks."""
        self._check()
        snap = Snapshot(stats)
        by_folder: dict[str, list[str]] = {}
        for rel, info in stats.items():
            if info.kind == "dir":
                continue
            if info.kind == "file" and started_ns - info.mtime_ns < RACY_NS:
                snap.racy.add(rel)
            by_folder.setdefault(rel.rpartition("/")[0], []).append(rel)
        self._keep_all(fs, snap, by_folder)
        self.index.flush()
        return snap

    def _keep_all(self, fs: SafeRoot, snap: Snapshot, by_folder: dict[str, list[str]]) -> None:
        """Keep the paths of each folder into `snap`, opening each folder once."""
        flushed = time.monotonic()
        for rels in by_folder.values():
            try:
                with fs.parent_of(rels[0], follow=False) as (folder, _):
                    for rel in rels:
                        self._add(snap, self.keep(fs, rel, snap.stats[rel], folder), rel)
            except (OSError, ToolError):  # the folder went: each path says why on its own
                for rel in rels:
                    self._add(snap, self.keep(fs, rel, snap.stats[rel]), rel)
            if time.monotonic() - flushed > _FLUSH_SECONDS:
                self.index.flush()  # a long first snapshot that is stopped keeps its progress
                flushed = time.monotonic()

    @staticmethod
    def _add(snap: Snapshot, state: State, rel: str) -> None:
        if state["kind"] == "lost":
            snap.lost[rel] = state["reason"]
        elif state["kind"] == "file":
            snap.digests[rel] = state["blob"]
        elif state["kind"] == "symlink":
            snap.links[rel] = state["target"]

    def changed(self, fs: SafeRoot, snap: Snapshot, after: dict[str, Stat]) -> list[str]:
        """The paths whose state differs between `snap` and the later scan `after`."""
        before = snap.stats
        with no_gc():
            found = set() if before == after else {rel for rel, _ in before.items() ^ after.items()}
        for rel in snap.racy - found:
            try:
                if sha256_at(fs, rel) != snap.digests.get(rel):
                    found.add(rel)
            except (OSError, ToolError):
                found.add(rel)
        return sorted(found)

    def old_state(self, snap: Snapshot, rel: str) -> State:
        """The state of `rel` in `snap`, lost if its blob went meanwhile (another process)."""
        state = snap.state(rel)
        if "blob" in state and not self.blobs.has(state["blob"]):
            return lost("its copy was removed from the data folder while the command ran")
        return state

    def live(self) -> set[str] | None:
        """The hashes the index names, which blob collection must keep (None: unknown)."""
        return self.index.digests()

    def _check(self) -> None:
        """Once: drop every row when the blob store is gone (its folder was removed)."""
        if self._checked:
            return
        self._checked = True
        if not self.blobs.root.is_dir():
            self.index.drop_all()

    def _keep_at(self, folder: int, rel: str, info: Stat) -> State:
        """Keep `rel`, a file or symlink in the folder open at `folder`."""
        name = rel.rpartition("/")[2]
        if info.kind == "symlink":
            target = os.readlink(name, dir_fd=folder)
            if time.time_ns() - info.mtime_ns > RACY_NS:
                self.index.put(rel, info, target)
            return {"kind": "symlink", "target": target}
        self._check()
        known = self.index.hashes.get(rel)
        if known and self.index.stats.get(rel) == info and self.blobs.has(known):
            digest = known
        else:
            digest, seen = self.blobs.store_at(folder, name, rel)
            if seen is not None and time.time_ns() - seen.mtime_ns > RACY_NS:
                self.index.put(rel, seen, digest)
        return {"kind": "file", "blob": digest, "mode": info.mode, "size": info.size}
