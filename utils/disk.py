"""A write that failed for want of space: told apart from other failures, said to a person."""

from __future__ import annotations

import errno
import sqlite3
from pathlib import Path

from protocol.errors import ErrorCode
from utils.errors import AgentError

FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
SQLITE_FULL = 13  # "database or disk is full"


class DiskFull(AgentError):
    """A write to the data folder failed: no space left on its disk, or the quota is used up.
    The message says which folder and what to do."""

    code: ErrorCode = "disk_full"


def is_disk_full(exc: BaseException | None) -> bool:
    """Whether `exc`, or what it was raised from, is a write refused for want of space."""
    seen = 0
    while exc is not None and seen < 8:
        if isinstance(exc, OSError) and exc.errno in FULL_ERRNOS:
            return True
        if isinstance(exc, sqlite3.Error) and getattr(exc, "sqlite_errorcode", None) == SQLITE_FULL:
            return True
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False


def disk_full(folder: Path | str, outcome: str) -> DiskFull:
    """The error to show when a write under `folder` found no space; `outcome` says what
    became of what the user asked for (a sentence)."""
    return DiskFull(
        f"The disk holding {folder} is full (or its quota is used up). {outcome} Free some "
        "space there, or start with --data-dir on a disk with room, then try again."
    )
