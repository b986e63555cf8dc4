"""The web token kept across restarts in DATA_DIR/web_token, so open tabs, bookmarks and the
printed URL keep working (docs/protocol.md §3). AGENT_WEB_TOKEN, when set, is used instead."""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path

from utils.files import temp_sibling
from utils.settings import MIN_TOKEN_CHARS, BadConfiguration

TOKEN_FILE = "web_token"
TOKEN_BYTES = 24  # 32 URL-safe characters
MAX_FILE_BYTES = 4096
STORED_TOKEN = re.compile(rf"[A-Za-z0-9_-]{{{MIN_TOKEN_CHARS},512}}")


@dataclass(frozen=True)
class WebToken:
    value: str
    note: str | None = None  # what a person should know: a stored token was replaced


def web_token(configured: str | None, data_dir: Path) -> WebToken:
    """AGENT_WEB_TOKEN when set, else the one kept in DATA_DIR/web_token, made on first use.

    A stored token that is not one (cut short, edited, binary) is replaced, with a note; a
    file that cannot be read is a BadConfiguration saying what to do."""
    if configured is not None:
        return WebToken(configured)
    path = data_dir / TOKEN_FILE
    stored = _read(path)
    if stored is None:
        return WebToken(_create(path))
    if STORED_TOKEN.fullmatch(stored):
        return WebToken(stored, _made_private(path))
    _replace(path)
    return WebToken(
        _read(path) or "",
        f"{path} did not hold a usable token, so a new one was made: "
        "tabs opened with the old one need the new URL",
    )


def _read(path: Path) -> str | None:
    """The file's text, stripped; None when there is no file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise _unreadable(path, exc) from exc
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise _unreadable(path, OSError("not a regular file"))
        raw = os.read(fd, MAX_FILE_BYTES)
    except OSError as exc:
        raise _unreadable(path, exc) from exc
    finally:
        os.close(fd)
    return raw.decode("utf-8", errors="replace").strip()


def _unreadable(path: Path, exc: OSError) -> BadConfiguration:
    reason = exc.strerror or str(exc)
    return BadConfiguration(
        f"the web token file {path} cannot be read ({reason}): make it a file you can read, "
        "or remove it to get a new token (tabs opened with the old one then need the new URL)"
    )


def _create(path: Path) -> str:
    """Write a new token, private to this user, unless another process sharing the data dir
    (AGENT_REDIS_URL) made one first: then that one."""
    tmp = _write_private(path)
    try:
        os.link(tmp, path)  # fails if the file exists: the first writer wins, whole
    except FileExistsError:
        return _read(path) or ""
    finally:
        tmp.unlink(missing_ok=True)
    return _read(path) or ""


def _replace(path: Path) -> None:
    tmp = _write_private(path)
    try:
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _write_private(path: Path) -> Path:
    """A new token in a private temporary sibling of `path`, on disk; returns its path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_sibling(path)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        os.fchmod(fd, 0o600)  # whatever the umask
        os.write(fd, f"{secrets.token_urlsafe(TOKEN_BYTES)}\n".encode())
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    os.close(fd)
    return tmp


def _made_private(path: Path) -> str | None:
    """Take away the group's and others' access to the file when someone gave it; say so."""
    with contextlib.suppress(OSError):
        mode = stat.S_IMODE(os.lstat(path).st_mode)
        if mode & 0o077:
            os.chmod(path, 0o600)
            return (
                f"{path} was readable by other users (mode {mode:o}); it is private now. "
                "If someone else may have read it, remove it and restart for a new token"
            )
    return None
