"""The stat -> content index of a workspace, kept on disk in sqlite.

`DATA_DIR/undo/index.sqlite` maps each workspace path to its Stat (size, mtime_ns, ctime_ns,
inode, mode), and a file to its SHA-256 and a symlink to its target (one row per workspace
root). A path whose lstat matches its entry exactly is trusted unread, in this process and
the next; undo_keeper writes the entries, each only once its file's bytes are in the blob
store.

Several processes may share the file: each writes by merging its changes into what is there,
under sqlite's write lock, and reads it again at each snapshot when another wrote since (the
baseline, see undo_baseline); an entry is never replaced by one with an older ctime (nor, of
the same ctime, by one that is not what the path is now), nor
dropped when its file appeared after the scan that missed it; an unreadable or corrupt file
is rebuilt.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import marshal
import os
import secrets
import sqlite3
from collections.abc import Iterator
from pathlib import Path

from modules.undo.blob_store import Stat, no_gc

log = logging.getLogger(__name__)

_VERSION = 4
_BUSY_SECONDS = 10.0
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

    def drop_all(self) -> None:
        """Forget every path; on disk, a row only if no newer ctime replaced it since."""
        for rel, info in list(self.stats.items()):
            self.drop(rel, info[_CTIME] + 1)

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
            if old is None or old[_CTIME] < info.ctime_ns or self._current(rel, old, info):
                self._set(rows, rel, info, value)
        for rel, older_than_ns in self._drop.items():
            old = stats.get(rel)
            if old is not None and old[_CTIME] < older_than_ns:
                del stats[rel]
                rows[1].pop(rel, None)
                rows[2].pop(rel, None)
        return rows

    def _current(self, rel: str, old: tuple, info: Stat) -> bool:
        """Whether `info` rather than `old`, of the same ctime, is what `rel` is now.

        A ctime is as coarse as the kernel's clock tick: a file written and then touched
        within one tick keeps its ctime, so only the path itself can say which entry is
        stale."""
        if old[_CTIME] != info.ctime_ns or tuple(old) == tuple(info):
            return old[_CTIME] == info.ctime_ns
        try:
            st = os.lstat(os.path.join(self.root, rel))
        except OSError:
            return False
        return Stat.of(st) == info

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
