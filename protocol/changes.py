"""The changes and git ops' payloads (docs/protocol.md §4.1 changes, git_*): what a
conversation's tasks changed, and the workspace's git repository, as the server validates them."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, Field

from protocol.requests import ConversationRef, Id

MAX_PATHS = 1000
WorkspacePath = Annotated[str, Field(min_length=1, max_length=4096)]


class ChangesRequest(ConversationRef):
    """The conversation's changes by task (of one task, `message_id`) and since it began."""

    message_id: Id | None = None


class GitDiffRequest(BaseModel):
    """The work tree's diff against the index, or (`staged`) the index's against HEAD."""

    staged: bool = False
    path: WorkspacePath | None = None


class GitPaths(BaseModel):
    """Paths to stage or unstage."""

    paths: list[WorkspacePath] = Field(min_length=1, max_length=MAX_PATHS)


class GitCommit(BaseModel):
    """A commit of what is staged."""

    message: str = Field(min_length=1, max_length=10_000)
