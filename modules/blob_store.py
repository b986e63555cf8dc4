"""Content-addressed copies of workspace files, and cheap metadata scans of the workspace.

A path's kept state is a small JSON-ready dict: `{"kind": "missing"}`, `{"kind": "file",
"blob": SHA256, "mode", "size"}`, `{"kind": "dir", "mode"}`, `{"kind": "symlink", "target"}`
or `{"kind": "lost", "reason"}` (it could not be kept, e.g. too large).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import stat
import time
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from modules.results import ToolError
from modules.safe_fs import SafeRoot, replace_at

State = dict[str, Any]
MISSING: State = {"kind": "missing"}
BLOB_LIMIT_BYTES = 50 * 1024 * 1024
RACY_NS = 1_000_000_000  # a file changed this recently may change again within one timestamp
_IN_MEMORY_BYTES = 1 << 20
_CHUNK = 1 << 20
_STALE_TMP_SECONDS = 3600


@dataclass(frozen=True)
class Stat:
    """What a scan sees of one path; equal stats mean the path did not change."""

    kind: str
    size: int
    mtime_ns: int
    ctime_ns: int
    ino: int
    mode: int

    @classmethod
    def of(cls, st: os.stat_result) -> Stat | None:
        """The Stat of an lstat result; None for sockets, fifos and devices."""
        if stat.S_ISREG(st.st_mode):
            kind = "file"
        elif stat.S_ISDIR(st.st_mode):
            kind = "dir"
        elif stat.S_ISLNK(st.st_mode):
            kind = "symlink"
        else:
            return None
        mode = stat.S_IMODE(st.st_mode)
        return cls(kind, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, mode)

    def same_as(self, other: Stat) -> bool:
        """Unchanged; a folder counts as unchanged while it stays a folder with its mode."""
        if self.kind == "dir" or other.kind == "dir":
            return self.kind == other.kind and self.mode == other.mode
        return self == other


def lost(reason: str) -> State:
    """The state of a path that could not be kept."""
    return {"kind": "lost", "reason": reason}


def scan(
    fs: SafeRoot, skip_names: Collection[str], skip_paths: Collection[str], top: str = ""
) -> dict[str, Stat]:
    """Every path under the folder `top` of `fs` (workspace POSIX paths) with its Stat.

    Symlinks are listed, never followed; sockets, fifos and devices are left out.
    """
    found: dict[str, Stat] = {}
    pending = [top]
    while pending:
        folder = pending.pop()
        try:
            items = fs.list_dir(folder)
        except (OSError, ToolError):
            continue
        prefix = f"{folder}/" if folder else ""
        for name, st in items:
            info = Stat.of(st)
            if info is None:
                continue
            rel = prefix + name
            if info.kind == "dir":
                if name in skip_names or str(fs.root / rel) in skip_paths:
                    continue
                pending.append(rel)
            found[rel] = info
    return found


def sha256_stream(handle: BinaryIO) -> str:
    """The SHA-256 of what is left to read in `handle`."""
    digest = hashlib.sha256()
    while chunk := handle.read(_CHUNK):
        digest.update(chunk)
    return digest.hexdigest()


def sha256_at(fs: SafeRoot, rel: str) -> str:
    """The SHA-256 of the regular file `rel` (never through a final link, never a fifo)."""
    with fs.open_regular(rel, follow=False) as (handle, _):
        return sha256_stream(handle)


class BlobStore:
    """Files kept by the SHA-256 of their bytes, with a (path, stat) -> hash cache.

    The cache lets a repeated scan skip reading files that did not change. Callers serialise
    access (UndoJournal holds its lock around every call).
    """

    def __init__(self, root: Path, *, max_bytes: int = BLOB_LIMIT_BYTES) -> None:
        self.root = root
        self.max_bytes = max_bytes
        self._cache: dict[str, tuple[Stat, str]] = {}

    def path(self, digest: str) -> Path:
        """Where the blob with this hash lives."""
        return self.root / digest[:2] / digest

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
            if info.size > self.max_bytes:
                limit = self.max_bytes // (1024 * 1024)
                return lost(f"{info.size:,} bytes, over the {limit} MB limit for undo copies")
            digest = self._digest(fs, rel, info)
        except OSError as exc:
            return lost(f"could not be read ({exc.strerror})")
        except ToolError as exc:
            return lost(str(exc))
        return {"kind": "file", "blob": digest, "mode": info.mode, "size": info.size}

    def cached(self, rel: str, info: Stat) -> str | None:
        """The known hash of a file whose stat has not changed since it was last kept."""
        hit = self._cache.get(rel)
        return hit[1] if hit is not None and hit[0] == info else None

    def _digest(self, fs: SafeRoot, rel: str, info: Stat) -> str:
        digest = self.cached(rel, info)
        if digest is not None:
            return digest
        digest = self._store(fs, rel)
        if time.time_ns() - info.mtime_ns > RACY_NS:
            self._cache[rel] = (info, digest)
        return digest

    def _store(self, fs: SafeRoot, rel: str) -> str:
        with fs.open_regular(rel, follow=False) as (source, st):
            if st.st_size <= _IN_MEMORY_BYTES:
                data = source.read()
                digest = hashlib.sha256(data).hexdigest()
                if not self.path(digest).exists():
                    self._publish(digest, lambda out: out.write(data))
                return digest
            hasher = hashlib.sha256()

            def copy(out: BinaryIO) -> None:
                while chunk := source.read(_CHUNK):
                    hasher.update(chunk)
                    out.write(chunk)

            tmp = self._write_tmp(copy)
        digest = hasher.hexdigest()
        self._place(tmp, digest)
        return digest

    def _publish(self, digest: str, write: Any) -> None:
        self._place(self._write_tmp(write), digest)

    def _write_tmp(self, write: Any) -> Path:
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = self.root / f"{secrets.token_hex(8)}.tmp"
        try:
            with open(tmp, "wb") as out:
                write(out)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        return tmp

    def _place(self, tmp: Path, digest: str) -> None:
        target = self.path(digest)
        if target.exists():
            tmp.unlink(missing_ok=True)
            return
        target.parent.mkdir(exist_ok=True)
        os.replace(tmp, target)

    def restore(self, digest: str, fs: SafeRoot, rel: str, mode: int) -> None:
        """Put the blob's bytes at `rel` (atomically, with `mode`); ValueError if damaged."""

        def copy(out: BinaryIO) -> None:
            hasher = hashlib.sha256()
            with open(self.path(digest), "rb") as source:
                while chunk := source.read(_CHUNK):
                    hasher.update(chunk)
                    out.write(chunk)
            if hasher.hexdigest() != digest:
                raise ValueError("its kept copy is damaged")

        with fs.parent_of(rel, follow=False) as (fd, name):
            replace_at(fd, name, copy, mode)

    def collect(self, live: set[str]) -> int:
        """Delete blobs neither in `live` nor in the cache; returns how many went."""
        keep = live | {digest for _, digest in self._cache.values()}
        removed = 0
        for folder in _folders(self.root):
            for entry in _entries(folder):
                if entry.name.endswith(".tmp") or entry.name in keep:
                    continue
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(entry.path)
                    removed += 1
        for entry in _entries(self.root):
            if entry.name.endswith(".tmp") and _older_than(entry, _STALE_TMP_SECONDS):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(entry.path)
        return removed


def _entries(folder: Path) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(folder) as entries:
            return list(entries)
    except FileNotFoundError:
        return []


def _folders(root: Path) -> list[Path]:
    return [Path(e.path) for e in _entries(root) if e.is_dir(follow_symlinks=False)]


def _older_than(entry: os.DirEntry[str], seconds: float) -> bool:
    try:
        return time.time() - entry.stat().st_mtime > seconds
    except FileNotFoundError:
        return False
