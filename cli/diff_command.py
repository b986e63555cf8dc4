"""`/diff [conversation]`: in a git repository, what `git diff` shows (staged, then not staged,
through the hardened runner); elsewhere, or with `conversation`, every file the conversation's
tasks changed since it began (from the undo journals). The local terminal reads them itself,
the remote one asks the server (changes, git_status, git_diff)."""

from __future__ import annotations

from typing import Any

from cli.remote_terminal import RemoteTerminal
from cli.terminal import CliTerminal
from modules.sandbox.worker_jail import worker_jail
from modules.undo.changes import Changes
from modules.workspace import git_ops
from modules.workspace.git import Git, GitError

CONVERSATION = "conversation"
NO_CONVERSATION = "no conversation yet: /diff shows what its tasks changed once one ran"


def local_diff(t: CliTerminal, arg: str) -> str:
    """`/diff` in the local terminal."""
    since_start = _wants_conversation(arg)
    git = Git(t.services.workspace.root, worker_jail(t.settings.local_sandbox))
    if not since_start and git.is_repository():
        try:
            status = git_ops.status(git).to_wire()
            return git_text(status, git_ops.diff(git, staged=True), git_ops.diff(git))
        except GitError as exc:
            raise ValueError(str(exc)) from None
    if t.conversation_id is None:
        return NO_CONVERSATION
    return changes_text(Changes(t.services.journal).since_start(t.conversation_id))


def remote_diff(t: RemoteTerminal, arg: str) -> str:
    """`/diff` in the remote terminal, through the server's ops."""
    since_start = _wants_conversation(arg)
    status = t.client.git_status()
    if not since_start and status.get("repository"):
        return git_text(status, t.client.git_diff(staged=True), t.client.git_diff())
    if t.conversation_id is None:
        return NO_CONVERSATION
    return changes_text(t.client.changes(t.conversation_id)["since_start"])


def _wants_conversation(arg: str) -> bool:
    if arg not in ("", CONVERSATION):
        raise ValueError(f"usage: /diff [{CONVERSATION}]")
    return arg == CONVERSATION


def git_text(status: dict[str, Any], staged: dict[str, Any], unstaged: dict[str, Any]) -> str:
    """The branch, then the staged and the not staged diff."""
    head = f"git: branch {status.get('branch') or '(detached)'}"
    parts = [head]
    for title, diff in (("staged", staged), ("not staged", unstaged)):
        if diff["diff"]:
            cut = " (cut: too long)" if diff.get("truncated") else ""
            parts.append(f"--- {title}{cut}\n{diff['diff'].rstrip()}")
    new = [f["path"] for f in status.get("files", []) if f["index"] == "?"]
    if new:
        parts.append("--- new, not added\n" + "\n".join(f"  {path}" for path in new))
    if len(parts) == 1:
        parts.append("nothing changed since the last commit")
    return "\n".join(parts)


def changes_text(files: list[dict[str, Any]]) -> str:
    """Each file the conversation changed: its diff, or why there is none."""
    if not files:
        return "no file changed since this conversation began"
    shown = []
    for file in files:
        body = (file["diff"] or "").rstrip() or f"({file['note'] or 'no change in content'})"
        shown.append(f"--- {file['path']}: {file['status']}\n{body}")
    return "\n".join(shown)
