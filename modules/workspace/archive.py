"""A workspace folder as a zip archive, written while it is sent (never whole in memory).

It holds what the file tree shows: the folders and files modules/workspace/ignore.py leaves out
(.gitignore'd paths, .git, node_modules, virtualenvs, caches) are skipped, and so are
symbolic links, pipes and devices; every file is read through the workspace's fd walk.
"""

from __future__ import annotations

import stat
import time
import zipfile
from collections.abc import Iterator

from modules.results import ToolError
from modules.workspace.file_tree import walk_shown
from modules.workspace.ignore import WorkspaceIgnore
from modules.workspace.paths import Workspace

CHUNK = 256 * 1024
_ZIP64_FROM = 1 << 30
_EPOCH_1980 = 315_532_800


class _Sink:
    """A write-only stream that hands what was written to the generator sending it."""

    def __init__(self) -> None:
        self._parts: list[bytes] = []
        self._position = 0

    def write(self, data: bytes) -> int:
        self._parts.append(bytes(data))
        self._position += len(data)
        return len(data)

    def tell(self) -> int:
        return self._position

    def flush(self) -> None:
        return None

    def close(self) -> None:  # a file object's, though ZipFile never closes one it was given
        return None

    def take(self) -> bytes:
        data = b"".join(self._parts)
        self._parts.clear()
        return data


def zip_stream(workspace: Workspace, folder: str = "") -> Iterator[bytes]:
    """The zip of `folder` ("" for the whole workspace) in pieces; entries are named from the
    folder's own name."""
    top = folder.rsplit("/", 1)[-1] if folder else workspace.root.name
    sink = _Sink()
    with zipfile.ZipFile(sink, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=6) as archive:
        for rel in _shown_files(workspace, folder):
            name = f"{top}/{rel[len(folder) :].lstrip('/')}"
            yield from _add(archive, workspace, rel, name, sink)
    yield sink.take()


def _add(
    archive: zipfile.ZipFile, workspace: Workspace, rel: str, name: str, sink: _Sink
) -> Iterator[bytes]:
    try:
        with workspace.open_regular(rel, follow=False) as (handle, info):
            entry = zipfile.ZipInfo(name, time.localtime(max(info.st_mtime, _EPOCH_1980))[:6])
            entry.compress_type = zipfile.ZIP_DEFLATED
            entry.external_attr = (stat.S_IMODE(info.st_mode) | stat.S_IFREG) << 16
            with archive.open(entry, "w", force_zip64=info.st_size >= _ZIP64_FROM) as out:
                while chunk := handle.read(CHUNK):
                    out.write(chunk)
                    yield sink.take()
    except (OSError, ToolError):  # gone meanwhile, or a link, pipe or device: left out
        return
    yield sink.take()


def _shown_files(workspace: Workspace, folder: str) -> Iterator[str]:
    shown = walk_shown(workspace, WorkspaceIgnore(workspace.root), folder)
    return (rel for rel, is_dir in shown if not is_dir)
