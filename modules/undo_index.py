"""What the workspace held before a command: a stat -> SHA-256 index kept on disk, snapshots.

`DATA_DIR/undo/index.sqlite` maps each workspace file to its size, mtime_ns, ctime_ns,
inode, mode and SHA-256 (one row per workspace root). A file whose lstat matches its entry
exactly is trusted unread, in this process and the next; any other file is read, hashed and
its bytes put in the blob store (once per distinct content), then its entry written. So every
hash the index names has its blob already (entries follow their blob, and the journal's blob
collection keeps every hash the index names): a command's snapshot copies nothing, and the
old bytes of whatever the command changes are there when it ends.

Entries are written only for files last modified over RACY_NS before they were read (a newer
one may change again within the same timestamp); those are hashed at every snapshot, and
again after the command. Several processes may share the file: each writes by merging its
changes into what is there, under sqlite's write lock; an entry is never replaced by one
with an older ctime, nor dropped when its file appeared after the scan that missed it; an
unreadable or corrupt file is rebuilt, and entries are all dropped when the blob store's
folder is gone. A changed file whose blob went all the same (removed by hand, or by another
process's collection at the wrong moment) is recorded as lost, never as content that undo
cannot put back.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import marshal
import os
import secrets
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from modules.blob_store import (
    MISSING,
    RACY_NS,
    BlobStore,
    Stat,
    State,
    lost,
    no_gc,
    sha256_at,
)
from modules.results import ToolError
from modules.safe_fs import SafeRoot

log = logging.getLogger(__name__)

_VERSION = 3
_BUSY_SECONDS = 10.0
_CORRUPT = {11, 26}  # SQLITE_CORRUPT, SQLITE_NOTADB
_CREATE = """CREATE TABLE workspaces (root TEXT PRIMARY KEY NOT NULL,
    generation INTEGER NOT NULL, sha256 TEXT NOT NULL, data BLOB NOT NULL)"""
Rows = tuple[dict[str, tuple], dict[str, str]]


class FileIndex:
    """path -> Stat and path -> SHA-256 of one workspace's files: in memory, and on disk."""

    def __init__(self, path: Path, root: str) -> None:
        self.path = path
        self.root = root
        self._loaded: Rows | None = None
        self._generation = 0  # names the write on disk that _loaded holds (plus our changes)
        self._put: dict[str, tuple[Stat, str]] = {}
        self._drop: dict[str, int] = {}

    @property
    def stats(self) -> dict[str, tuple]:
        """The Stat each indexed file had when it was hashed (read from disk on first use)."""
        return self._rows()[0]

    @property
    def hashes(self) -> dict[str, str]:
        """The SHA-256 of each indexed file."""
        return self._rows()[1]

    def put(self, rel: str, info: Stat, digest: str) -> None:
        """Remember that the file `rel` with this Stat holds the content `digest`."""
        stats, hashes = self._rows()
        stats[rel], hashes[rel] = tuple(info), digest  # plain tuples: marshal writes them
        self._put[rel] = (info, digest)
        self._drop.pop(rel, None)

    def drop(self, rel: str, older_than_ns: int) -> None:
        """Forget `rel`; on disk, only a row of a file changed before `older_than_ns`."""
        stats, hashes = self._rows()
        if stats.pop(rel, None) is not None:
            hashes.pop(rel, None)
            self._put.pop(rel, None)
            self._drop[rel] = older_than_ns

    def flush(self) -> None:
        """Merge what changed since the last flush into the file; kept for later if it fails."""
        if not self._put and not self._drop:
            return
        try:
            with self._open() as conn:
                conn.execute("BEGIN IMMEDIATE")
                stats, hashes = self._merge(self._on_disk(conn))
                data = marshal.dumps((stats, hashes))
                generation = secrets.randbits(62)  # names this write, for _on_disk
                row = (self.root, generation, hashlib.sha256(data).hexdigest(), data)
                conn.execute("INSERT OR REPLACE INTO workspaces VALUES (?, ?, ?, ?)", row)
                conn.execute("COMMIT")
        except (sqlite3.Error, ValueError) as exc:
            self._failed("could not be written", exc)
            return
        self._loaded, self._generation = (stats, hashes), generation
        self._put.clear()
        self._drop.clear()

    def _on_disk(self, conn: sqlite3.Connection) -> Rows:
        """The rows on disk, read only when another process wrote since this one did."""
        found = conn.execute(
            "SELECT generation FROM workspaces WHERE root = ?", (self.root,)
        ).fetchone()
        generation = found[0] if found else 0
        if generation == self._generation and self._loaded is not None:
            return self._loaded  # they are ours already, changes applied
        try:
            rows, self._generation = _decode(conn, self.root)
        except ValueError:  # damaged: this process's rows replace it
            rows, self._generation = (dict(self.stats), dict(self.hashes)), generation
        return rows

    def digests(self) -> set[str] | None:
        """Every hash the index names, for any workspace; None when it cannot be read.

        The entries of a workspace folder that no longer exists are dropped first.
        """
        found = set(self.hashes.values())
        try:
            with self._open() as conn:
                for (root,) in conn.execute("SELECT root FROM workspaces").fetchall():
                    if root != self.root and not os.path.isdir(root):
                        conn.execute("DELETE FROM workspaces WHERE root = ?", (root,))
                        continue
                    found.update(_decode(conn, root)[0][1].values())
        except (sqlite3.Error, ValueError) as exc:
            self._failed("could not be read", exc)
            return None
        return found

    def _merge(self, rows: Rows) -> Rows:
        """The rows on disk with this process's puts and drops applied (never older ones)."""
        stats, hashes = rows
        for rel, (info, digest) in self._put.items():
            old = stats.get(rel)
            if old is None or old[3] <= info.ctime_ns:
                stats[rel], hashes[rel] = tuple(info), digest
        for rel, older_than_ns in self._drop.items():
            old = stats.get(rel)
            if old is not None and old[3] < older_than_ns:
                del stats[rel], hashes[rel]
        return stats, hashes

    def _rows(self) -> Rows:
        if self._loaded is None:
            try:
                with self._open() as conn:
                    self._loaded, self._generation = _decode(conn, self.root)
            except (sqlite3.Error, ValueError) as exc:
                self._failed("could not be read", exc)
                self._loaded = {}, {}
        return self._loaded

    @contextlib.contextmanager
    def _open(self) -> Iterator[sqlite3.Connection]:
        """A connection to the index file, created (or rebuilt) with the current table."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, timeout=_BUSY_SECONDS, isolation_level=None)
        try:
            if conn.execute("PRAGMA user_version").fetchone()[0] != _VERSION:
                _create(conn)
            yield conn
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        finally:
            conn.close()

    def _failed(self, what: str, exc: Exception) -> None:
        """Log; a corrupt file is removed, so the next use starts a new one."""
        code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
        corrupt = code in _CORRUPT or isinstance(exc, ValueError)
        log.warning(
            f"undo index {what}" + ("; it is corrupt and will be rebuilt" if corrupt else ""),
            extra={"fields": {"path": str(self.path), "error": str(exc)}},
        )
        if corrupt:
            for suffix in ("", "-journal", "-wal", "-shm"):
                Path(f"{self.path}{suffix}").unlink(missing_ok=True)


def _create(conn: sqlite3.Connection) -> None:
    """Make the table of this version, dropping those of another (checked under the lock)."""
    conn.execute("BEGIN IMMEDIATE")
    if conn.execute("PRAGMA user_version").fetchone()[0] != _VERSION:
        conn.execute("DROP TABLE IF EXISTS files")
        conn.execute("DROP TABLE IF EXISTS workspaces")
        conn.execute(_CREATE)
        conn.execute(f"PRAGMA user_version = {_VERSION}")
    conn.execute("COMMIT")


def _decode(conn: sqlite3.Connection, root: str) -> tuple[Rows, int]:
    """One workspace's rows ({path: stat tuple}, {path: SHA-256}) and their generation.

    They are kept as one marshal blob (a tenth of the time of reading 20,000 table rows),
    checked against its SHA-256 before marshal reads it, so marshal only reads what this
    module wrote. ValueError when it is damaged.
    """
    found = conn.execute(
        "SELECT generation, sha256, data FROM workspaces WHERE root = ?", (root,)
    ).fetchone()
    if found is None:
        return ({}, {}), 0
    generation, checksum, data = found
    if not isinstance(data, bytes) or hashlib.sha256(data).hexdigest() != checksum:
        raise ValueError("the index does not match its checksum")
    with no_gc():
        rows = marshal.loads(data)
    if not (isinstance(rows, tuple) and len(rows) == 2 and all(type(r) is dict for r in rows)):
        raise ValueError("the index is not of the expected shape")
    return rows, generation


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

    def keep(self, fs: SafeRoot, rel: str, info: Stat | None) -> State:
        """The state of `rel` as `info` describes it, keeping a file's bytes."""
        if info is None:
            return lost("not a regular file, folder or symbolic link")
        if info.kind == "dir":
            return {"kind": "dir", "mode": info.mode}
        try:
            if info.kind == "symlink":
                return {"kind": "symlink", "target": fs.readlink(rel)}
            if info.size > self.blobs.max_bytes:
                limit = self.blobs.max_bytes // (1024 * 1024)
                return lost(f"{info.size:,} bytes, over the {limit} MB limit for undo copies")
            digest = self._digest(fs, rel, info)
        except OSError as exc:
            return lost(f"could not be read ({exc.strerror})")
        except ToolError as exc:
            return lost(str(exc))
        return {"kind": "file", "blob": digest, "mode": info.mode, "size": info.size}

    def snapshot(self, fs: SafeRoot, stats: dict[str, Stat], started_ns: int) -> Snapshot:
        """The Snapshot of a scan begun at `started_ns`; reads only files the index lacks."""
        self._check()
        known, index = self.index.stats, self.index
        with no_gc():
            unknown = [rel for rel, info in stats.items() if known.get(rel) != info]
            recent = [rel for rel, info in stats.items() if started_ns - info.mtime_ns < RACY_NS]
            snap = Snapshot(stats, dict(index.hashes))
        snap.racy = {rel for rel in recent if stats[rel].kind == "file"}
        stale = len(stats) - len(unknown) != len(known)  # rows of files that changed or went
        for rel in unknown:
            if stats[rel].kind != "dir":
                self._add(snap, fs, rel, stats[rel])
        if stale:
            for rel in [rel for rel, info in known.items() if stats.get(rel) != info]:
                index.drop(rel, started_ns)
        index.flush()
        return snap

    def _add(self, snap: Snapshot, fs: SafeRoot, rel: str, info: Stat) -> None:
        """Keep one path the index did not know, into `snap`."""
        state = self.keep(fs, rel, info)
        if state["kind"] == "lost":
            snap.lost[rel] = state["reason"]
        elif state["kind"] == "file":
            snap.digests[rel] = state["blob"]
        else:
            snap.links[rel] = state["target"]

    def changed(self, fs: SafeRoot, snap: Snapshot, after: dict[str, Stat]) -> list[str]:
        """The paths whose state differs between `snap` and the later scan `after`."""
        before = snap.stats
        found = set() if before == after else {
            rel for rel in before.keys() | after.keys() if before.get(rel) != after.get(rel)
        }
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
            for rel, info in list(self.index.stats.items()):
                self.index.drop(rel, info[3] + 1)

    def _digest(self, fs: SafeRoot, rel: str, info: Stat) -> str:
        self._check()
        known = self.index.hashes.get(rel)
        if known and self.index.stats.get(rel) == info and self.blobs.has(known):
            return known
        digest, seen = self.blobs.store(fs, rel)
        if seen is not None and time.time_ns() - seen.mtime_ns > RACY_NS:
            self.index.put(rel, seen, digest)
        return digest
