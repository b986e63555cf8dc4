"""The workspace's files as MCP resources: `workspace:///PATH`, PATH relative to the workspace
with each segment percent-encoded. What the file tree hides (modules.workspace.ignore) is
neither listed nor read; every open goes through SafeRoot, so no URI reaches outside the
workspace, whatever it spells.
"""

from __future__ import annotations

import base64
import bisect
import mimetypes
import stat
from collections import deque
from urllib.parse import quote, unquote, urlsplit

import mcp_types as types
from mcp.shared.exceptions import MCPError

from modules.results import ToolError
from modules.workspace.file_tree import scan_dir
from modules.workspace.ignore import WorkspaceIgnore
from modules.workspace.paths import Workspace

SCHEME = "workspace"
PAGE_SIZE = 200
MAX_LISTED = 20_000  # files, and folders, walked for one listing; a bigger one is listed in part
MAX_READ_BYTES = 512 * 1024  # base64 grows a blob by a third: within the SDK's 1 MiB event
RESOURCE_NOT_FOUND = -32002  # the code the MCP specification gives a missing resource


def uri_for(rel: str) -> str:
    return f"{SCHEME}:///{quote(rel, safe='/')}"


class WorkspaceResources:
    """List and read the workspace's files; `rel_of` maps a URI back to a path or refuses it."""

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace

    def page(self, cursor: str | None) -> types.ListResourcesResult:
        """One page of files in path order; the cursor is the last path of the page before."""
        files = self._files()
        start = 0
        if cursor is not None:
            try:
                after = base64.urlsafe_b64decode(cursor.encode("ascii")).decode("utf-8")
            except (ValueError, UnicodeError):
                raise MCPError(types.INVALID_PARAMS, "not a cursor this server gave") from None
            start = bisect.bisect_right([rel for rel, _ in files], after)
        chunk = files[start : start + PAGE_SIZE]
        following = None
        if start + PAGE_SIZE < len(files):
            following = base64.urlsafe_b64encode(chunk[-1][0].encode("utf-8")).decode("ascii")
        return types.ListResourcesResult(
            resources=[_describe(rel, size) for rel, size in chunk], next_cursor=following
        )

    def _files(self) -> list[tuple[str, int]]:
        """(path, size) of every shown regular file, breadth-first up to MAX_LISTED files in
        as many folders, sorted."""
        ignore = WorkspaceIgnore(self.workspace.root)
        found: list[tuple[str, int]] = []
        folders: deque[str] = deque([""])
        walked = 0
        while folders and len(found) < MAX_LISTED and walked < MAX_LISTED:
            rel_dir = folders.popleft()
            walked += 1
            for name, is_dir in scan_dir(self.workspace, ignore, rel_dir):
                rel = f"{rel_dir}/{name}" if rel_dir else name
                if is_dir:
                    folders.append(rel)
                    continue
                info = self.workspace.lstat(rel, follow=True)
                if info is not None and stat.S_ISREG(info.st_mode):
                    found.append((rel, info.st_size))
        found.sort()
        return found[:MAX_LISTED]

    def rel_of(self, uri: str) -> str:
        """The workspace path a URI names, or MCPError: another scheme, a host, `..`, a hidden
        path."""
        parts = urlsplit(uri)
        if parts.scheme != SCHEME or parts.netloc or parts.query or parts.fragment:
            raise MCPError(
                RESOURCE_NOT_FOUND, f"not a workspace resource: {uri!r} (they are {SCHEME}:///PATH)"
            )
        rel = unquote(parts.path).lstrip("/")
        segments = rel.split("/")
        if not rel or any(s in ("", ".", "..") for s in segments) or "\x00" in rel:
            raise MCPError(RESOURCE_NOT_FOUND, f"not a file path in the workspace: {uri!r}")
        if WorkspaceIgnore(self.workspace.root).hides(rel, False):
            raise MCPError(RESOURCE_NOT_FOUND, f"no resource {uri!r}: the workspace hides it")
        return rel

    def read(self, uri: str) -> types.ReadResourceResult:
        """Text as text, anything else as a base64 blob with its MIME type; at most
        MAX_READ_BYTES."""
        rel = self.rel_of(uri)
        try:
            with self.workspace.open_regular(rel) as (handle, info):
                if info.st_size > MAX_READ_BYTES:
                    raise MCPError(
                        types.INVALID_PARAMS,
                        f"{rel} is {info.st_size} bytes; resources are read up to "
                        f"{MAX_READ_BYTES} bytes (the read_file tool reads a range of lines)",
                    )
                data = handle.read(MAX_READ_BYTES + 1)
        except (FileNotFoundError, NotADirectoryError):
            raise MCPError(RESOURCE_NOT_FOUND, f"no resource {uri!r}: no such file") from None
        except (ToolError, OSError) as exc:
            raise MCPError(RESOURCE_NOT_FOUND, f"no resource {uri!r}: {exc}") from None
        if len(data) > MAX_READ_BYTES:
            raise MCPError(types.INVALID_PARAMS, f"{rel} grew past {MAX_READ_BYTES} bytes")
        mime = _mime(rel)
        content: types.TextResourceContents | types.BlobResourceContents
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            text = None
        if text is not None and "\x00" not in text:
            content = types.TextResourceContents(uri=uri, mime_type=mime or "text/plain", text=text)
        else:
            blob = base64.b64encode(data).decode("ascii")
            content = types.BlobResourceContents(
                uri=uri, mime_type=mime or "application/octet-stream", blob=blob
            )
        return types.ReadResourceResult(contents=[content])


def _mime(rel: str) -> str | None:
    return mimetypes.guess_type(rel, strict=False)[0]


def _describe(rel: str, size: int) -> types.Resource:
    return types.Resource(
        uri=uri_for(rel),
        name=rel.rsplit("/", 1)[-1],
        title=rel,
        mime_type=_mime(rel),
        size=size,
    )
