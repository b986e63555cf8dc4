"""The page's editor: a workspace file opened with its version, and a person's save of it.

A version is the SHA-256 of the file's bytes. A save names the version it was edited from;
when the file holds another now (the agent or a program wrote it meanwhile) the save is a
conflict and changes nothing, so neither side's bytes are lost. A save goes through the same
guarded, atomic write as the file tools (no path out of the workspace, no symbolic link
followed out, temp file and rename); a path Workspace Agent reads as its own configuration is
saved only once the person confirmed it. Undo needs nothing more: a saved file no longer holds
what its task left, so undoing the task leaves it as a conflict (modules/undo/conflicts.py).
"""

from __future__ import annotations

import dataclasses
import hashlib
import stat
import threading
from dataclasses import dataclass
from typing import Any

from modules.results import ToolError
from modules.workspace.paths import Workspace
from modules.workspace.protected import ProtectedPaths
from modules.workspace.safe_fs import NotRegular
from protocol.event_values import FileChange

EDITOR_LIMIT_BYTES = 2 * 1024 * 1024  # larger files open read-only
BINARY_PROBE_BYTES = 8192
HASH_CHUNK_BYTES = 1024 * 1024


def version_of(data: bytes) -> str:
    """The version of a file's bytes."""
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class EditorFile:
    """A file as the editor opens it: its text and version, or why it is read-only."""

    path: str
    size: int
    content: str | None  # None: binary, nothing to show
    version: str  # of all its bytes, shown or not
    read_only: str | None = None  # why the editor cannot change it

    def to_wire(self) -> dict[str, Any]:
        """The file as open_file answers it."""
        return dataclasses.asdict(self)


class SaveConflict(ToolError):
    """The file changed since the version the save was edited from."""

    def __init__(self, current: EditorFile | None) -> None:
        super().__init__("the file changed since it was opened: nothing was saved")
        self.current = current  # None: it is gone


class NeedsConfirmation(ToolError):
    """The save would change Workspace Agent's own configuration: the person confirms first."""


def _as_editor_file(rel: str, data: bytes, size: int, version: str) -> EditorFile:
    if b"\x00" in data[:BINARY_PROBE_BYTES]:
        return EditorFile(rel, size, None, version, "a binary file: it cannot be edited here")
    if size > EDITOR_LIMIT_BYTES:
        head = data[:EDITOR_LIMIT_BYTES].decode("utf-8", errors="replace")
        limit = EDITOR_LIMIT_BYTES // 2**20
        why = f"over {limit} MB: it opens read-only, showing its first {limit} MB"
        return EditorFile(rel, size, head, version, why)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        why = "not UTF-8 text: a save would change bytes it does not show"
        return EditorFile(rel, size, data.decode("utf-8", errors="replace"), version, why)
    return EditorFile(rel, size, text, version)


def open_for_edit(workspace: Workspace, path: str) -> EditorFile:
    """The workspace file at `path` as the editor shows it (raises ToolError or OSError when
    it is no regular file inside the workspace)."""
    rel = workspace.relative(workspace.resolve(path))
    with workspace.open_regular(rel) as (handle, info):
        data = handle.read(EDITOR_LIMIT_BYTES + 1)
        digest = hashlib.sha256(data)
        while chunk := handle.read(HASH_CHUNK_BYTES):  # a large file's rest, hashed unseen
            digest.update(chunk)
        size = info.st_size
    return _as_editor_file(rel, data, size, digest.hexdigest())


class EditorSaves:
    """Saves from the page's editors, one at a time, so two cannot both pass the version check."""

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace
        self.protected = ProtectedPaths(workspace.root)
        self._lock = threading.Lock()

    def save(
        self, path: str, content: str, base_version: str | None, *, confirmed: bool = False
    ) -> tuple[EditorFile, FileChange]:
        """Write `content` over the file last seen at `base_version` (None: a new file), or
        raise SaveConflict, NeedsConfirmation or ToolError, changing nothing."""
        ws = self.workspace
        rel = ws.relative(ws.resolve(path, for_write=True))
        reason = self.protected.reason(rel)
        if reason is not None and not confirmed:
            raise NeedsConfirmation(f"Saving it changes {reason}.")
        data = content.encode("utf-8")
        if len(data) > EDITOR_LIMIT_BYTES:
            raise ToolError(f"the text is over {EDITOR_LIMIT_BYTES // 2**20} MB: not saved")
        with self._lock:
            current = self._current(rel)
            if (current.version if current else None) != base_version:
                raise SaveConflict(current)
            ws.write_atomic(rel, data)
        saved = EditorFile(rel, len(data), content, version_of(data))
        return saved, FileChange("modified" if current else "created", rel)

    def _current(self, rel: str) -> EditorFile | None:
        """The file as it is now; None when nothing is there."""
        info = self.workspace.lstat(rel, follow=True)
        if info is None:
            return None
        if not stat.S_ISREG(info.st_mode):
            raise NotRegular(rel, info.st_mode)
        return open_for_edit(self.workspace, rel)
