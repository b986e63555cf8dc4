"""The one way files are replaced: whole, through a temporary sibling and an atomic rename;
and a lock between processes that write the same files."""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
from collections.abc import Iterator
from pathlib import Path


def temp_sibling(path: Path) -> Path:
    """A fresh hidden name beside `path` for writing before an atomic rename (the live tree
    ignores such `.NAME.HEX.tmp` files)."""
    return path.with_name(f".{path.name[:200]}.{secrets.token_hex(4)}.tmp")


def atomic_write(
    path: Path, data: str | bytes, *, durable: bool = True, mode: int | None = None
) -> os.stat_result:
    """Replace `path` whole, so readers see the old or the new content, never half; keeps its
    mode, or gives it `mode` (private from its first byte when `mode` is given). `durable`:
    the new content is on disk before the rename (else a crash may leave the file empty, for
    files rebuilt from others). Returns the new file's stat.

    Few system calls, as each one lets the other threads take the interpreter: a server
    thread writing meta.json while tokens stream waits its turn after every call."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    created = 0o666 if mode is None else 0o600
    if mode is None:
        with contextlib.suppress(FileNotFoundError):
            mode = os.stat(path).st_mode & 0o7777
    tmp = temp_sibling(path)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
    try:
        fd = os.open(tmp, flags, created)
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(tmp, flags, created)
    try:
        try:
            if mode is not None:
                os.fchmod(fd, mode)
            view = memoryview(raw)
            while view:
                view = view[os.write(fd, view) :]
            if durable:
                os.fsync(fd)
            written = os.fstat(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return written


@contextlib.contextmanager
def directory_lock(directory: Path) -> Iterator[None]:
    """Hold an exclusive advisory lock on `directory` against other processes (threads of one
    process still need their own lock); no lock file is left behind."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock
