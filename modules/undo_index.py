"""What the workspace held before a command: a stat -> content index kept on disk, snapshots.

`DATA_DIR/undo/index.sqlite` maps each workspace path to its Stat (size, mtime_ns, ctime_ns,
inode, mode), and a file to its SHA-256 and a symlink to its target (one row per workspace
root). A path whose lstat matches its entry exactly is trusted unread, in this process and
the next; any other file is read, hashed and its bytes put in the blob store (once per
distinct content), then its entry written. So every hash the index names has its blob
already (entries follow their blob, and the journal's blob collection keeps every hash the
index names): a command's snapshot copies nothing, and the old bytes of whatever the
command changes are there when it ends. When nothing changed since the index was written,
a snapshot is one scan and one comparison of two dicts.

Entries are written only for files last modified over RACY_NS before they were read (a newer
one may change again within the same timestamp); those are hashed at every snapshot, and
again after the command. Several processes may share the file: each writes by merging its
changes into what is there, under sqlite's write lock, and reads it again at each snapshot
when another wrote since (the baseline, see undo_baseline); an entry is never replaced by one
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

_VERSION = 4
_BUSY_SECONDS = 10.0
_FLUSH_SECONDS = 2.0  # while many files are kept, what is done so far is written this often
_CORRUPT = {11, 26}  # SQLITE_CORRUPT, SQLITE_NOTADB
_CREATE = """CREATE TABLE workspaces (root TEXT PRIMARY KEY NOT NULL,
    generation INTEGER NOT NULL, sha256 TEXT NOT NULL, data BLOB NOT NULL)"""
_CTIME = Stat._fields.index("ctime_ns")
Rows = tuple[dict[str, tuple], dict[str, str], dict[str, str]]


class FileIndex:
    """path -> Stat, file -> SHA-256 and symlink -> target of one workspace: in memory and
    on disk."""

    def __init__(self, path: Path, root: str) -> None:
        self.path = path
        self.root = root
        self._loaded: Rows | None = None
        self._generation = 0  # names the write on disk that _loaded holds (plus our changes)
        self._put: dict[str, tuple[Stat, str | None]] = {}
        self._drop: dict[str, int] = {}

    @property
    def stats(self) -> dict[str, tuple]:
        """The Stat each indexed path had when it was kept (read from disk on first use)."""
        return self._rows()[0]

    @property
    def hashes(self) -> dict[str, str]:
        """The SHA-256 of each indexed file."""
        return self._rows()[1]

    @property
    def links(self) -> dict[str, str]:
        """The target of each indexed symlink."""
        return self._rows()[2]

    def put(self, rel: str, info: Stat, value: str | None) -> None:
        """Remember that `rel` with this Stat holds `value`: a file's SHA-256, a symlink's
        target, None for a folder."""
        self._set(self._rows(), rel, info, value)
        self._put[rel] = (info, value)
        self._drop.pop(rel, None)

    def drop(self, rel: str, older_than_ns: int) -> None:
        """Forget `rel`; on disk, only a row of a path changed before `older_than_ns`."""
        stats, hashes, links = self._rows()
        if stats.pop(rel, None) is not None:
            hashes.pop(rel, None)
            links.pop(rel, None)
            self._put.pop(rel, None)
            self._drop[rel] = older_than_ns

    def flush(self) -> None:
        """Merge what changed since the last flush into the file; kept for later if it fails."""
        if not self._put and not self._drop:
            return
        try:
            with self._open() as conn:
                conn.execute("BEGIN IMMEDIATE")
                rows = self._merge(self._on_disk(conn))
                data = marshal.dumps(rows)
                generation = secrets.randbits(62)  # names this write, for _on_disk
                row = (self.root, generation, hashlib.sha256(data).hexdigest(), data)
                conn.execute("INSERT OR REPLACE INTO workspaces VALUES (?, ?, ?, ?)", row)
                conn.execute("COMMIT")
        except (sqlite3.Error, ValueError) as exc:
            self._failed("could not be written", exc)
            return
        self._loaded, self._generation = rows, generation
        self._put.clear()
        self._drop.clear()

    def refresh(self) -> None:
        """Read the rows again if another process wrote them since this one last did."""
        if self._loaded is None:
            return  # read on first use anyway
        try:
            with self._open() as conn:
                if _generation(conn, self.root) == self._generation:
                    return
                rows, self._generation = _decode(conn, self.root)
        except (sqlite3.Error, ValueError) as exc:
            self._failed("could not be read", exc)
            return
        self._loaded = self._merge(rows)

    def _on_disk(self, conn: sqlite3.Connection) -> Rows:
        """The rows on disk, read only when another process wrote since this one did."""
        if _generation(conn, self.root) == self._generation and self._loaded is not None:
            return self._loaded  # they are ours already, changes applied
        try:
            rows, self._generation = _decode(conn, self.root)
        except ValueError:  # damaged: this process's rows replace it
            stats, hashes, links = self._rows()
            rows, self._generation = (dict(stats), dict(hashes), dict(links)), 0
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
        """`rows` with this process's puts and drops applied (never older ones)."""
        stats = rows[0]
        for rel, (info, value) in self._put.items():
            old = stats.get(rel)
            if old is None or old[_CTIME] <= info.ctime_ns:
                self._set(rows, rel, info, value)
        for rel, older_than_ns in self._drop.items():
            old = stats.get(rel)
            if old is not None and old[_CTIME] < older_than_ns:
                del stats[rel]
                rows[1].pop(rel, None)
                rows[2].pop(rel, None)
        return rows

    @staticmethod
    def _set(rows: Rows, rel: str, info: Stat, value: str | None) -> None:
        stats, hashes, links = rows
        stats[rel] = tuple(info)  # plain tuples: marshal writes them
        hashes.pop(rel, None)
        links.pop(rel, None)
        if value is not None:
            (hashes if info.kind == "file" else links)[rel] = value

    def _rows(self) -> Rows:
        if self._loaded is None:
            try:
                with self._open() as conn:
                    self._loaded, self._generation = _decode(conn, self.root)
            except (sqlite3.Error, ValueError) as exc:
                self._failed("could not be read", exc)
                self._loaded = {}, {}, {}
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


def _generation(conn: sqlite3.Connection, root: str) -> int:
    found = conn.execute("SELECT generation FROM workspaces WHERE root = ?", (root,)).fetchone()
    return found[0] if found else 0


def _decode(conn: sqlite3.Connection, root: str) -> tuple[Rows, int]:
    """One workspace's rows (stats, hashes, links) and their generation.

    They are kept as one marshal blob (a tenth of the time of reading 20,000 table rows),
    checked against its SHA-256 before marshal reads it, so marshal only reads what this
    module wrote. ValueError when it is damaged.
    """
    found = conn.execute(
        "SELECT generation, sha256, data FROM workspaces WHERE root = ?", (root,)
    ).fetchone()
    if found is None:
        return ({}, {}, {}), 0
    generation, checksum, data = found
    if not isinstance(data, bytes) or hashlib.sha256(data).hexdigest() != checksum:
        raise ValueError("the index does not match its checksum")
    with no_gc():
        rows = marshal.loads(data)
    if not (isinstance(rows, tuple) and len(rows) == 3 and all(type(r) is dict for r in rows)):
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
            for rel, info in list(self.index.stats.items()):
                self.index.drop(rel, info[_CTIME] + 1)

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
