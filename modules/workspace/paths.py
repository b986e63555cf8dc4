"""The one resolver that confines every tool path to the workspace."""

from __future__ import annotations

import os
import re
from pathlib import Path

from modules.workspace.safe_fs import PathOutsideWorkspace, SafeRoot

__all__ = ["PathOutsideWorkspace", "Workspace"]

_DRIVE = re.compile(r"^[A-Za-z]:")
_NAME_MAX = 255
_PATH_MAX = 4096


class Workspace(SafeRoot):
    """The folder the agent may read and change.

    `resolve` checks a path argument and names it (for messages and workspace-relative
    names); every open then goes through the fd walk of SafeRoot, which a swap between the
    check and the use cannot redirect outside.
    """

    def resolve(self, path: str, *, for_write: bool = False, follow_symlinks: bool = True) -> Path:
        """Map a workspace-relative (or absolute, inside) path to a real path, or raise.

        With `follow_symlinks=False` the last component is kept as it is, so a symlink inside
        the workspace can itself be renamed or deleted; its target must still be inside.
        """
        _check_spelling(path)
        candidate = Path(path) if os.path.isabs(path) else self.root / path
        real = _realpath(path, candidate)
        if not self._contains(real):
            raise PathOutsideWorkspace(_outside_message(path, candidate, real))
        name = candidate.name
        if real == self.root or name == "..":
            result = real
        else:
            parent = _realpath(path, candidate.parent)
            if not self._contains(parent):
                raise PathOutsideWorkspace(_outside_message(path, candidate.parent, parent))
            result = real if follow_symlinks else parent / name
        if for_write:
            self._check_writable(path, result)
        return result

    def relative(self, p: Path) -> str:
        """The workspace-relative POSIX spelling of `p` ("" for the root itself)."""
        try:
            rel = Path(p).relative_to(self.root)
        except ValueError:
            raise PathOutsideWorkspace(f"Path {str(p)!r} is not inside the workspace") from None
        text = rel.as_posix()
        return "" if text == "." else text

    def _contains(self, real: Path) -> bool:
        return real == self.root or real.is_relative_to(self.root)

    def _check_writable(self, path: str, target: Path) -> None:
        if target == self.root:
            raise PathOutsideWorkspace(
                f"Path {path!r} is the workspace root itself; name a file or folder inside it"
            )
        ancestor = target.parent
        while not ancestor.exists() and ancestor != self.root:
            ancestor = ancestor.parent
        if not ancestor.is_dir():
            rel = self.relative(ancestor)
            raise PathOutsideWorkspace(
                f"Path {path!r} goes through {rel!r}, which is a file, not a folder"
            )


def _realpath(path: str, candidate: Path) -> Path:
    try:
        return Path(os.path.realpath(candidate))
    except OSError as exc:  # a symlink on the way changed while it was read
        raise PathOutsideWorkspace(
            f"Path {path!r} could not be checked ({exc.strerror}); it changed while being read"
        ) from None


def _check_spelling(path: str) -> None:
    """Reject spellings that cannot name a workspace file, before touching the disk."""
    if not isinstance(path, str) or not path.strip():
        raise PathOutsideWorkspace("Path is empty; give a path relative to the workspace")
    if "\x00" in path:
        raise PathOutsideWorkspace(f"Path {path!r} contains a NUL byte")
    if path.startswith("~"):
        raise PathOutsideWorkspace(
            f"Path {path!r} starts with '~': home directories are outside the workspace; "
            "use a path relative to the workspace"
        )
    if "\\" in path or _DRIVE.match(path):
        raise PathOutsideWorkspace(
            f"Path {path!r} looks like a Windows path; use forward slashes and a path "
            "relative to the workspace"
        )
    try:
        encoded = os.fsencode(path)
    except UnicodeError:
        raise PathOutsideWorkspace(
            f"Path {path!r} contains characters that cannot be encoded"
        ) from None
    if len(encoded) > _PATH_MAX:
        raise PathOutsideWorkspace(
            f"Path is {len(encoded)} bytes long; the filesystem limit is {_PATH_MAX}"
        )
    for part in encoded.split(b"/"):
        if len(part) > _NAME_MAX:
            shown = os.fsdecode(part[:40]) + "…"
            raise PathOutsideWorkspace(
                f"Name {shown!r} is {len(part)} bytes long; the filesystem limit is "
                f"{_NAME_MAX} bytes per name"
            )


def _outside_message(path: str, candidate: Path, real: Path) -> str:
    if os.path.isabs(path):
        why = "absolute paths must point inside the workspace"
    elif ".." in Path(path).parts and os.path.normpath(candidate) == str(real):
        why = "'..' leads out of the workspace"
    else:
        why = f"it leads to {str(real)!r} through a symbolic link"
    return f"Path {path!r} is outside the workspace: {why}"
