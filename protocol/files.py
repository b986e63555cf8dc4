"""The editor's ops (docs/protocol.md §4.1 open_file, save_file): a workspace file opened with
its version, and a person's save naming the version it was edited from."""

from __future__ import annotations

from pydantic import BaseModel, Field

from protocol.requests import WorkspacePath

MAX_SAVE_CHARS = 2 * 1024 * 1024  # the editor's limit is in bytes; the server checks those
Version = str  # the SHA-256 of the file's bytes, as open_file gave it


class OpenFile(BaseModel):
    path: WorkspacePath = Field(min_length=1)


class SaveFile(BaseModel):
    path: WorkspacePath = Field(min_length=1)
    content: str = Field(max_length=MAX_SAVE_CHARS)
    base_version: Version | None = Field(None, min_length=64, max_length=64)  # None: a new file
    confirmed: bool = False  # the person agreed to change Workspace Agent's own configuration
