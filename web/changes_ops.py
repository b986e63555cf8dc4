"""The Socket.IO ops on what changed in the workspace (§4.1): `changes` (a conversation's tasks,
from their undo journals) and, when the workspace is a git repository, `git_status`,
`git_diff`, `git_stage`, `git_unstage` and `git_commit`, through the hardened runner of
modules/workspace/git.py. The page's own acts: nothing asks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flask_socketio import SocketIO

from modules.sandbox.worker_jail import worker_jail
from modules.undo.changes import Changes
from modules.workspace import git_ops
from modules.workspace.git import Git, GitError
from protocol.changes import ChangesRequest, GitCommit, GitDiffRequest, GitPaths
from protocol.errors import failure
from protocol.requests import Empty
from web.handlers import acked
from web.state import WebState


def _git_refusals(function: Callable[[Any], dict[str, Any]]) -> Callable[[Any], dict[str, Any]]:
    """A git op's failure (no repository, git said no) as an `{ok: false}` ack."""

    def wrapper(msg: Any) -> dict[str, Any]:
        try:
            return function(msg)
        except GitError as exc:
            return failure("invalid", str(exc))

    wrapper.__name__ = function.__name__
    return wrapper


def register_changes_handlers(socketio: SocketIO, state: WebState) -> None:
    """The changes and git ops (docs/protocol.md §4.1)."""
    services = state.services

    def git() -> Git:
        return Git(services.workspace.root, worker_jail(services.settings.local_sandbox))

    @socketio.on("changes")
    @acked(ChangesRequest)
    def on_changes(msg: ChangesRequest) -> dict[str, Any]:
        services.store.get(msg.conversation_id)  # not_found for an unknown conversation
        changes = Changes(services.journal)
        tasks = changes.by_task(msg.conversation_id, msg.message_id)
        since = changes.since_start(msg.conversation_id) if msg.message_id is None else None
        return {"ok": True, "tasks": tasks, "since_start": since}

    @socketio.on("git_status")
    @acked(Empty)
    @_git_refusals
    def on_git_status(_: Empty) -> dict[str, Any]:
        repo = git()
        if not repo.is_repository():
            return {"ok": True, "repository": False}
        return {"ok": True, "repository": True, **git_ops.status(repo).to_wire()}

    @socketio.on("git_diff")
    @acked(GitDiffRequest)
    @_git_refusals
    def on_git_diff(msg: GitDiffRequest) -> dict[str, Any]:
        return {"ok": True, **git_ops.diff(git(), staged=msg.staged, path=msg.path)}

    for name, apply in (("git_stage", git_ops.stage), ("git_unstage", git_ops.unstage)):
        socketio.on(name)(acked(GitPaths)(_git_refusals(_on_paths(git, apply))))

    @socketio.on("git_commit")
    @acked(GitCommit)
    @_git_refusals
    def on_git_commit(msg: GitCommit) -> dict[str, Any]:
        return {"ok": True, **git_ops.commit(git(), msg.message)}


def _on_paths(
    git: Callable[[], Git], apply: Callable[[Git, list[str]], None]
) -> Callable[[GitPaths], dict[str, Any]]:
    """The handler of an op that applies `apply` to the paths it names (stage, unstage)."""

    def handler(msg: GitPaths) -> dict[str, Any]:
        apply(git(), msg.paths)
        return {"ok": True}

    handler.__name__ = f"on_{apply.__name__}"
    return handler
