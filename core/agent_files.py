"""The agent definition files of one folder, read within limits.

The user's folders (the shipped `agents/`, `DATA_DIR/agents/`) are read by their paths; the
workspace's `.agents/agents/` only through the workspace root (modules/workspace/safe_fs.py), so
a symbolic link anywhere on the way, the folders included, never leads out of the workspace.
Either way only regular files are read (a pipe never blocks the start), each refused by its size,
and by the folder's total, before it is parsed.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from modules.results import ToolError
from modules.workspace.safe_fs import PathOutsideWorkspace, SafeRoot

MAX_FILE_BYTES = 128 * 1024  # a definition, or a prompt file beside it
MAX_FOLDER_BYTES = 512 * 1024  # all those read of one folder: each costs its parse at start
SUFFIXES = (".yaml", ".yml", ".json")


class AgentFileError(ValueError):
    """A definition file that cannot be read or does not validate."""


@dataclass
class AgentFolder:
    """A folder of definitions: the user's own (`within` None), or one inside the workspace
    `within`, `path` then being relative to it. At most MAX_FOLDER_BYTES of it are read."""

    path: Path
    within: Path | None = None
    spent: int = 0  # bytes read of it so far

    @property
    def shown(self) -> Path:
        return self.path if self.within is None else self.within / self.path

    def names(self) -> list[str]:
        """Its definition files by name, in order; none when there is no folder. AgentFileError
        when the workspace's folder is reached through a link out of it."""
        try:
            if self.within is None:
                found = [entry.name for entry in os.scandir(self.path)]
            else:
                found = [name for name, _ in SafeRoot(self.within).list_dir(str(self.path))]
        except PathOutsideWorkspace:
            raise AgentFileError(
                f"{self.path} leads out of the workspace (a symbolic link on the way): its "
                "definitions are not read"
            ) from None
        except (OSError, ToolError):
            return []
        return sorted(name for name in found if name.endswith(SUFFIXES))

    def read(self, name: str) -> str:
        """The text of the file `name` in this folder, at most MAX_FILE_BYTES; AgentFileError
        saying why not (FileNotFoundError when there is none)."""
        try:
            data = self._read(name)
        except PathOutsideWorkspace:
            raise AgentFileError(
                f"{name} leads out of the workspace (a symbolic link on the way); it is not read"
            ) from None
        except FileNotFoundError:
            raise
        except (OSError, ToolError) as exc:
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise AgentFileError(f"{name} cannot be read: {why}") from None
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise AgentFileError(f"{name} is not UTF-8 text (byte {exc.start})") from None

    def _read(self, name: str) -> bytes:
        if self.within is not None:
            with SafeRoot(self.within).open_regular(f"{self.path}/{name}", name) as (handle, info):
                return self._take(name, handle.fileno(), info)
        fd = os.open(self.path / name, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise OSError(errno.EINVAL, "not a regular file")
            return self._take(name, fd, info)
        finally:
            os.close(fd)

    def _take(self, name: str, fd: int, info: os.stat_result) -> bytes:
        """The file's bytes, once its size and the folder's are found within their limits."""
        if info.st_size > MAX_FILE_BYTES:
            raise AgentFileError(
                f"{name} is {info.st_size:,} bytes, over the {MAX_FILE_BYTES:,} byte limit"
            )
        if self.spent + info.st_size > MAX_FOLDER_BYTES:
            raise AgentFileError(
                f"{name} is not read: with it, the folder's files would pass "
                f"{MAX_FOLDER_BYTES:,} bytes together"
            )
        data = b""
        while len(data) <= MAX_FILE_BYTES:
            more = os.read(fd, MAX_FILE_BYTES + 1 - len(data))
            if not more:
                break
            data += more
        if len(data) > MAX_FILE_BYTES:
            raise AgentFileError(f"{name} grew over the {MAX_FILE_BYTES:,} byte limit while read")
        self.spent += len(data)
        return data
