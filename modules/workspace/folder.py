"""The workspace folder at start, for every front: it must be a folder (made only when asked
or when it is the default one), and a read-only one is said to be so (docs/protocol.md §1)."""

from __future__ import annotations

import os
import shlex
import stat
from pathlib import Path


class WorkspaceUnusable(Exception):
    """The workspace cannot be used as given; the message says why and what to do."""


def prepare_workspace(path: Path, *, create: bool) -> None:
    """Check that `path` is a folder; make it (with its parents) when missing and `create`."""
    try:
        info = path.stat()
    except FileNotFoundError:
        if not create:
            raise WorkspaceUnusable(
                f"the workspace {path} does not exist. Create it with: "
                f"mkdir -p {shlex.quote(str(path))}  (or start with --create to have it made)"
            ) from None
        _make(path)
        return
    except NotADirectoryError:
        raise WorkspaceUnusable(_under_a_file(path)) from None
    except PermissionError:
        raise WorkspaceUnusable(
            f"the workspace {path} cannot be reached: this user may not open a folder above it"
        ) from None
    if not stat.S_ISDIR(info.st_mode):
        raise WorkspaceUnusable(
            f"the workspace {path} is a file, not a folder: the workspace is the folder the "
            f"agent works in. Give a folder instead, such as the one holding it: "
            f"--workspace {shlex.quote(str(path.parent))}"
        )


def read_only_warning(path: Path) -> str | None:
    """Why the agent cannot change the workspace, or None when it can."""
    if os.access(path, os.W_OK | os.X_OK):
        return None
    try:
        mounted = bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        mounted = False
    why = "its file system is mounted read-only" if mounted else "this user may not write it"
    return (
        f"the workspace {path} is read-only ({why}): the agent can read it, "
        "but every change it tries will fail"
    )


def _make(path: Path) -> None:
    try:
        path.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise WorkspaceUnusable(_under_a_file(path)) from None
    except PermissionError as exc:
        raise WorkspaceUnusable(
            f"the workspace {path} cannot be created: this user may not write "
            f"{exc.filename or path.parent}"
        ) from None
    except OSError as exc:
        raise WorkspaceUnusable(f"the workspace {path} cannot be created: {exc.strerror}") from None


def _under_a_file(path: Path) -> str:
    above = next((p for p in path.parents if p.is_file()), None)
    where = f"{above} is a file" if above else "a path above it is not a folder"
    return f"the workspace {path} cannot be a folder: {where}"
