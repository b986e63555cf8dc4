"""What the fronts do with the workspace's repository: its status, diffs, staging and commits,
each through the hardened runner of modules.workspace.git."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from modules.workspace.git import Git, GitError

DIFF_CHARS = 1_000_000
MESSAGE_CHARS = 10_000


@dataclass
class GitStatus:
    """The branch (None: detached or no commit yet reads as such) and each changed path."""

    branch: str | None = None
    head: str | None = None
    files: list[dict[str, Any]] = field(default_factory=list)
    truncated: bool = False

    def to_wire(self) -> dict[str, Any]:
        """As the git_status op answers it."""
        return dataclasses.asdict(self)


def status(git: Git) -> GitStatus:
    """`git status --porcelain=v2 -z --branch`, parsed: index and work-tree state per path."""
    result = git.run(
        [
            "status",
            "--porcelain=v2",
            "-z",
            "--branch",
            "--untracked-files=all",
            "--ignore-submodules=all",
        ]
    )
    found = GitStatus(truncated=result.truncated)
    fields = result.stdout.decode("utf-8", "surrogateescape").split("\0")
    i = 0
    while i < len(fields):
        record = fields[i]
        i += 1
        if record.startswith("# branch.head "):
            head = record[len("# branch.head ") :]
            found.branch = None if head == "(detached)" else head
        elif record.startswith("# branch.oid "):
            oid = record[len("# branch.oid ") :]
            found.head = None if oid == "(initial)" else oid
        elif record[:2] in ("1 ", "u "):
            parts = record.split(" ", 8 if record[0] == "1" else 10)
            found.files.append(_entry(parts[1], parts[-1]))
        elif record.startswith("2 "):
            parts = record.split(" ", 9)
            entry = _entry(parts[1], parts[-1])
            entry["from"] = fields[i] if i < len(fields) else ""
            i += 1
            found.files.append(entry)
        elif record.startswith("? "):
            found.files.append({"path": record[2:], "index": "?", "worktree": "?"})
    return found


def _entry(xy: str, path: str) -> dict[str, Any]:
    return {"path": path, "index": xy[0], "worktree": xy[1]}


def diff(git: Git, *, staged: bool = False, path: str | None = None) -> dict[str, Any]:
    """The unified diff of the work tree against the index (or, `staged`, the index against
    HEAD), of one path or all; at most DIFF_CHARS characters."""
    args = ["diff", "--no-ext-diff", "--no-textconv", "--no-color", "--ignore-submodules=all"]
    if staged:
        args.append("--cached")
    args.append("--")
    if path is not None:
        args.append(_pathspec(path))
    result = git.run(args)
    text = result.stdout.decode("utf-8", "replace")
    truncated = result.truncated or len(text) > DIFF_CHARS
    return {"diff": text[:DIFF_CHARS], "truncated": truncated, "staged": staged}


def stage(git: Git, paths: list[str]) -> None:
    """`git add` these paths (a deleted one is staged as deleted)."""
    git.check_writes()
    git.run(["add", "--all", "--", *map(_pathspec, _some(paths))])


def unstage(git: Git, paths: list[str]) -> None:
    """Take these paths out of the index again (back to HEAD, or out, before a first commit)."""
    git.check_writes()
    specs = [_pathspec(p) for p in _some(paths)]
    if git.run(["rev-parse", "--verify", "--quiet", "HEAD"], check=False).code == 0:
        git.run(["reset", "--quiet", "HEAD", "--", *specs])
    else:
        git.run(["rm", "--cached", "--quiet", "-r", "--", *specs])


def commit(git: Git, message: str) -> dict[str, Any]:
    """Commit what is staged with `message`; the new commit's hash and first line."""
    git.check_writes()
    text = message.strip()
    if not text:
        raise GitError("A commit needs a message.")
    if len(text) > MESSAGE_CHARS:
        raise GitError(f"The message is over {MESSAGE_CHARS:,} characters.")
    if git.run(["diff", "--cached", "--quiet", "--ignore-submodules=all"], check=False).code == 0:
        raise GitError("Nothing is staged to commit.")
    git.run(["commit", "--quiet", "--no-verify", "--cleanup=strip", "-m", text], env=git.identity())
    head = git.run(["rev-parse", "HEAD"]).stdout.decode().strip()
    return {"commit": head, "summary": text.splitlines()[0]}


def _some(paths: list[str]) -> list[str]:
    if not paths:
        raise GitError("Name at least one path.")
    return paths


def _pathspec(path: str) -> str:
    """A path taken literally (no globs, no magic), relative to the workspace."""
    if path.startswith("/") or "\0" in path or ".." in path.split("/"):
        raise GitError(f"Not a workspace path: {path!r}")
    return ":(literal)" + path
