"""Focus files: up to a few files whose current content the model sees every turn."""

from __future__ import annotations

import os
import stat

from modules.results import ToolError
from modules.workspace.paths import Workspace
from protocol.options import MAX_FOCUS
from utils.text import cap_text

FOCUS_CHARS_PER_FILE = 20_000
_WINDOW_BYTES = 4 * FOCUS_CHARS_PER_FILE  # UTF-8 takes at most 4 bytes a character


def _under(key: str, path: str) -> bool:
    return key == path or key.startswith(path + "/")


def focusable(workspace: Workspace, path: str) -> str:
    """The workspace path of `path` when it names a file that may be in focus (a regular
    file, or a link within the workspace to one); raises ToolError otherwise."""
    rel = workspace.relative(workspace.resolve(path, follow_symlinks=False))
    info = workspace.lstat(rel, follow=True)
    if info is None or not stat.S_ISREG(info.st_mode):
        raise ToolError(f"{rel or path} is not an existing file; only a file can be in focus.")
    return rel


class FocusFiles:
    """An ordered list of workspace-relative paths, at most `limit` long."""

    def __init__(self, paths: list[str] | None = None, limit: int = MAX_FOCUS) -> None:
        self.limit = limit
        self._paths = list(dict.fromkeys(paths or []))[:limit]

    def reset(self, paths: list[str]) -> None:
        """Focus exactly `paths` (at most `limit`), as a conversation opened stored them."""
        self._paths = list(dict.fromkeys(paths))[: self.limit]

    def paths(self) -> list[str]:
        """The focused paths, oldest first."""
        return list(self._paths)

    def add(self, path: str) -> bool:
        """Focus `path`; False if it already was. Raises when the list is full."""
        if path in self._paths:
            return False
        if len(self._paths) >= self.limit:
            current = ", ".join(self._paths)
            raise ToolError(
                f"Focus is full ({self.limit} files: {current}). "
                "Unfocus one with unfocus_file first."
            )
        self._paths.append(path)
        return True

    def remove(self, path: str) -> None:
        """Unfocus `path`; raises when it was not focused."""
        if path not in self._paths:
            current = ", ".join(self._paths) or "none"
            raise ToolError(f"{path} is not in focus. Focused files: {current}")
        self._paths.remove(path)

    def move(self, old: str, new: str) -> None:
        """Follow a rename of `old` (a file, or a folder holding focused files)."""
        self._paths = [new + p[len(old) :] if _under(p, old) else p for p in self._paths]

    def drop(self, path: str) -> None:
        """Forget `path` and anything under it, without complaint."""
        self._paths = [p for p in self._paths if not _under(p, path)]

    def contents(self, workspace: Workspace) -> list[tuple[str, str]]:
        """Each focused file's current text, capped; files that vanished are dropped."""
        result = []
        for path in self.paths():
            try:
                rel = workspace.relative(workspace.resolve(path))
                text = _capped_text(workspace, rel)
            except (ToolError, OSError):
                self._paths.remove(path)
                continue
            result.append((path, text))
        return result


def _capped_text(workspace: Workspace, rel: str) -> str:
    """The head and tail of a file's text within FOCUS_CHARS_PER_FILE characters. At most two
    windows of _WINDOW_BYTES are read, however large the file (a command can make it 1 GB, or
    sparse and larger, and the server reads it before every model call)."""
    with workspace.open_regular(rel) as (handle, info):
        if info.st_size <= 2 * _WINDOW_BYTES:
            data, tail = handle.read(2 * _WINDOW_BYTES), b""
        else:
            data = os.pread(handle.fileno(), _WINDOW_BYTES, 0)
            tail = os.pread(handle.fileno(), _WINDOW_BYTES, info.st_size - _WINDOW_BYTES)
    if b"\x00" in data[:8192]:
        return "(binary file; content not shown)"
    if not tail:
        return cap_text(data.decode("utf-8", errors="replace"), FOCUS_CHARS_PER_FILE)
    keep = FOCUS_CHARS_PER_FILE * 2 // 3
    head_text = data.decode("utf-8", errors="replace")[:keep]
    tail_text = tail.decode("utf-8", errors="replace")[keep - FOCUS_CHARS_PER_FILE :]
    cut = info.st_size - len(head_text.encode()) - len(tail_text.encode())
    return f"{head_text}\n… [{cut:,} bytes omitted] …\n{tail_text}"
