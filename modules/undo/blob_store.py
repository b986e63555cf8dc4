"""Content-addressed copies of workspace files, and cheap metadata scans of the workspace.

A path's kept state is a small JSON-ready dict: `{"kind": "missing"}`, `{"kind": "file",
"blob": SHA256, "mode", "size"}`, `{"kind": "dir", "mode"}`, `{"kind": "symlink", "target"}`
or `{"kind": "lost", "reason"}` (it could not be kept, e.g. too large). Which file holds which
content is remembered by modules.undo.index; this module only stores and scans.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import os
import secrets
import stat
import time
from collections.abc import Callable, Collection, Iterator
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple

from modules.results import ToolError
from modules.sandbox.disk_floor import MB, Floor, Usage
from modules.workspace.safe_fs import NotRegular, SafeRoot, replace_at

State = dict[str, Any]
MISSING: State = {"kind": "missing"}
BLOB_LIMIT_BYTES = 50 * 1024 * 1024
RACY_NS = 1_000_000_000  # a file changed this recently may change again within one timestamp
_IN_MEMORY_BYTES = 1 << 20
_CHUNK = 1 << 20
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_TMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
_STALE_TMP_SECONDS = 3600
_KINDS = {stat.S_IFREG: "file", stat.S_IFDIR: "dir", stat.S_IFLNK: "symlink"}
_S_IFMT = 0o170000
_FILE_KINDS = frozenset({stat.S_IFREG, stat.S_IFLNK})
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_new = tuple.__new__
_MAX_DEPTH = 64  # folders held open at once in one descent


class Stat(NamedTuple):
    """What a scan sees of one path; equal stats mean the path did not change.

    `st_mode` holds the kind and the permission bits. A folder's stat holds only that (its
    times change with its entries, and those are scanned themselves), so a folder counts as
    unchanged while it stays a folder with its mode.
    """

    size: int
    mtime_ns: int
    ctime_ns: int
    ino: int
    st_mode: int

    @property
    def kind(self) -> str:
        """file, dir or symlink."""
        return _KINDS[stat.S_IFMT(self.st_mode)]

    @property
    def mode(self) -> int:
        """The permission bits."""
        return self.st_mode & 0o7777

    @classmethod
    def of(cls, st: os.stat_result) -> Stat | None:
        """The Stat of an lstat result; None for sockets, fifos and devices."""
        kind = _KINDS.get(stat.S_IFMT(st.st_mode))
        if kind is None:
            return None
        if kind == "dir":
            return _new(cls, (0, 0, 0, 0, st.st_mode))
        return _new(cls, (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_mode))


def lost(reason: str) -> State:
    """The state of a path that could not be kept."""
    return {"kind": "lost", "reason": reason}


def scan(fs: SafeRoot, skip_names: Collection[str], top: str = "") -> dict[str, Stat]:
    """Every path under the folder `top` of `fs` (workspace POSIX paths) with its Stat.

    Symlinks are listed, never followed; sockets, fifos and devices are left out. `top` is
    reached by the fd walk of SafeRoot, and each folder below it is opened from its parent's
    fd without following links (this runs over the whole workspace twice per command).
    """
    found: dict[str, Stat] = {}
    pending = [top]
    while pending:
        folder = pending.pop()
        try:
            with fs.parent_of(folder) as (parent, name):
                fd = os.open(name, _DIR_FLAGS, dir_fd=parent)
        except (OSError, ToolError):
            continue
        walk = _Walk(skip_names, found)
        with no_gc():
            walk.folder(fd, f"{folder}/" if folder else "", 0)
        pending += walk.deeper
    return found


def scan_tops(fs: SafeRoot, tops: Collection[str], skip_names: Collection[str]) -> dict[str, Stat]:
    """`scan` of a few paths alone: each of `tops` that exists (a final link not followed) with
    its Stat, and everything under those that are folders."""
    found: dict[str, Stat] = {}
    for top in tops:
        try:
            st = fs.lstat(top)
        except (OSError, ToolError):  # a folder on its way is not one, or leads outside
            continue
        info = None if st is None else Stat.of(st)
        if info is None:
            continue
        found[top] = info
        if info.kind == "dir":
            found.update(scan(fs, skip_names, top=top))
    return found


class _Walk:
    """One descent from an open folder; folders past _MAX_DEPTH are left in `deeper`."""

    def __init__(self, skip_names: Collection[str], found: dict[str, Stat]) -> None:
        self.skip_names = skip_names
        self.found = found
        self.deeper: list[str] = []

    def folder(self, fd: int, prefix: str, depth: int) -> None:
        """Add the folder open at `fd` (which this closes) and everything under it."""
        found, folders, new = self.found, [], _new
        ifmt, ifdir, kept = _S_IFMT, stat.S_IFDIR, _FILE_KINDS
        try:
            with os.scandir(fd) as entries:
                for entry in entries:  # Stat.of inlined: this runs for every path, twice a command
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except FileNotFoundError:
                        continue
                    mode = st.st_mode
                    kind = mode & ifmt
                    if kind in kept:
                        found[prefix + entry.name] = new(
                            Stat, (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, mode)
                        )
                    elif kind == ifdir:
                        name = entry.name
                        if name not in self.skip_names:
                            found[prefix + name] = new(Stat, (0, 0, 0, 0, mode))
                            folders.append(name)
            for name in folders:
                self._below(fd, prefix, name, depth)
        except OSError:
            return
        finally:
            os.close(fd)

    def _below(self, fd: int, prefix: str, name: str, depth: int) -> None:
        if depth >= _MAX_DEPTH:
            self.deeper.append(prefix + name)
            return
        try:
            child = os.open(name, _DIR_FLAGS, dir_fd=fd)
        except OSError:
            return
        self.folder(child, f"{prefix}{name}/", depth + 1)


@contextlib.contextmanager
def no_gc() -> Iterator[None]:
    """Cyclic collection off: it would walk the many young tuples again and again."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


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


class Sparse(ToolError):
    """A file mostly made of holes: a copy would take the disk its size, which a command got for
    nothing (40 MB files made with `truncate` took 801 MB of blobs for 84 KB of workspace)."""

    def __init__(self, shown: str, st: os.stat_result) -> None:
        super().__init__(
            f"{shown} is a sparse file ({st.st_size:,} bytes, {st.st_blocks * 512:,} of them on "
            "disk): undo keeps no copy of it"
        )


class NotKept(ToolError):
    """A file whose copy was not made or not finished: it grew past the limit while it was
    read, or the copy would take the data folder's disk below its floor."""


class BlobStore:
    """Files kept by the SHA-256 of their bytes, each distinct content once; no copy larger than
    `max_bytes`, nor one that would leave less free space than `floor` on the data folder's
    file system (AGENT_DISK_FLOOR_MB: undo copies are no command's, but fill the same disk)."""

    def __init__(
        self, root: Path, *, max_bytes: int = BLOB_LIMIT_BYTES, floor: Floor | None = None
    ) -> None:
        self.root = root
        self.max_bytes = max_bytes
        self.floor = floor or Floor()

    def path(self, digest: str) -> Path:
        """Where the blob with this hash lives."""
        return self.root / digest[:2] / digest

    def has(self, digest: str) -> bool:
        """Whether the blob with this hash is in the store."""
        return os.path.exists(f"{self.root}/{digest[:2]}/{digest}")

    def store_at(self, folder: int, name: str, shown: str) -> tuple[str, Stat | None]:
        """Keep the bytes of the regular file `name` in the folder open at `folder`: (their
        hash, the Stat they belong to, None when it changed while it was read). Never through
        a link, never blocking: anything but a regular file is NotRegular, named `shown`."""
        mode = os.stat(name, dir_fd=folder, follow_symlinks=False).st_mode
        if not stat.S_ISREG(mode):  # checked before opening: a device is never opened
            raise NotRegular(shown, mode)
        fd = os.open(name, _READ_FLAGS, dir_fd=folder)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise NotRegular(shown, st.st_mode)
            if st.st_size > _IN_MEMORY_BYTES and st.st_blocks * 512 < st.st_size // 2:
                raise Sparse(shown, st)
            if st.st_size > _IN_MEMORY_BYTES:
                return self._store_large(fd, st, shown)
            data = _read_upto(fd, self.max_bytes)
            if len(data) > self.max_bytes:
                raise self._grew(shown)
            digest = hashlib.sha256(data).hexdigest()
            after = os.fstat(fd)
        finally:
            os.close(fd)
        if not self.has(digest):
            self._room_for(len(data), shown)
            self._place(self._write_tmp(lambda out: _write_all(out, data)), digest)
        return digest, _unchanged(st, after)

    def _store_large(self, fd: int, st: os.stat_result, shown: str) -> tuple[str, Stat | None]:
        hasher = hashlib.sha256()
        found = self._room_for(st.st_size, shown)
        most = self.max_bytes if found is None else min(self.max_bytes, found[0])

        def copy(out: int) -> None:
            copied = 0
            while chunk := os.read(fd, min(_CHUNK, most + 1 - copied)):
                copied += len(chunk)
                if copied > self.max_bytes:
                    raise self._grew(shown)
                if found is not None and copied > most:  # it grew past the room there was
                    raise self._no_room(copied, shown, found[1])
                hasher.update(chunk)
                _write_all(out, chunk)

        tmp = self._write_tmp(copy)
        after = os.fstat(fd)
        digest = hasher.hexdigest()
        self._place(tmp, digest)
        return digest, _unchanged(st, after)

    def _grew(self, shown: str) -> NotKept:
        limit = self.max_bytes // (1024 * 1024)
        return NotKept(f"{shown} grew past the {limit} MB limit for undo copies while it was read")

    def _room_for(self, size: int, shown: str) -> tuple[int, Usage] | None:
        """The room the floor leaves on the data folder's file system, and its usage (None: no
        floor, or it cannot be read); NotKept when `size` bytes more would go below it."""
        found = self.floor.room(self.root)
        if found is not None and size > found[0]:
            raise self._no_room(size, shown, found[1])
        return found

    def _no_room(self, size: int, shown: str, usage: Usage) -> NotKept:
        return NotKept(
            f"{shown} ({size:,} bytes or more) was not copied for undo: the data folder's file "
            f"system had {usage.free // MB} MB free, and its floor of "
            f"{self.floor.floor_of(usage) // MB} MB is kept (AGENT_DISK_FLOOR_MB)"
        )

    def _write_tmp(self, write: Callable[[int], object]) -> str:
        tmp = f"{self.root}/{secrets.token_hex(8)}.tmp"
        try:
            fd = os.open(tmp, _TMP_FLAGS, 0o644)
        except FileNotFoundError:
            os.makedirs(self.root, exist_ok=True)
            fd = os.open(tmp, _TMP_FLAGS, 0o644)
        try:
            write(fd)
        except BaseException:
            os.unlink(tmp)
            raise
        finally:
            os.close(fd)
        return tmp

    def _place(self, tmp: str, digest: str) -> None:
        """Move a written blob to its place (an equal one there already is replaced)."""
        target = f"{self.root}/{digest[:2]}/{digest}"
        try:
            os.replace(tmp, target)
        except FileNotFoundError:
            os.makedirs(os.path.dirname(target), exist_ok=True)
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
        """Delete blobs not in `live`; returns how many went."""
        removed = 0
        for folder in _folders(self.root):
            for entry in _entries(folder):
                if entry.name.endswith(".tmp") or entry.name in live:
                    continue
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(entry.path)
                    removed += 1
        for entry in _entries(self.root):
            if entry.name.endswith(".tmp") and _older_than(entry, _STALE_TMP_SECONDS):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(entry.path)
        return removed


def _read_upto(fd: int, most: int) -> bytes:
    """What is in the file at `fd`, but no more than `most` + 1 bytes (a file that grew while
    it was read is read on, that far)."""
    parts: list[bytes] = []
    left = most + 1
    while left > 0 and (chunk := os.read(fd, min(_CHUNK, left))):
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _unchanged(before: os.stat_result, after: os.stat_result) -> Stat | None:
    """The Stat of `before` when `after` (its fstat once read) shows no change, else None."""
    info = Stat.of(before)
    return info if info is not None and info == Stat.of(after) else None


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
