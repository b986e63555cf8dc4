"""Conflicts of an undo: paths changed since their task left them, which undo leaves alone.

When a task ends, the state it left each path it changed in is added to its manifest's
`after` (undo_manifests): `{"kind": "file", "sha256", "mode", "size"}`, a folder with its
mode, a symlink with its target, or `missing`; hashes only, the bytes are not kept. Before
undo puts a path back it compares the path with that: one that differs now (changed, deleted,
or made again where the task deleted it: by the user, another program or a later task) is a
conflict, left as it is unless the caller chooses to overwrite it, and so is every path inside
one. A path whose after state was not recorded (its task never ended: the process stopped) is
a conflict too, since what it holds now may be anyone's work.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping

from modules.results import ToolError
from modules.undo.blob_store import MISSING, Stat, State, lost, sha256_at
from modules.undo.restore import Conflict, UndoAction
from modules.workspace.paths import Workspace

NOT_RECORDED = "what the task left here was not recorded, so a later change cannot be ruled out"


def state_now(ws: Workspace, rel: str) -> State:
    """The state of `rel` now, a file's content named by its hash (nothing is kept)."""
    try:
        st = ws.lstat(rel)
        if st is None:
            return dict(MISSING)
        info = Stat.of(st)
        if info is None:
            return lost("not a regular file, folder or symbolic link")
        if info.kind == "dir":
            return {"kind": "dir", "mode": info.mode}
        if info.kind == "symlink":
            return {"kind": "symlink", "target": ws.readlink(rel)}
        digest = sha256_at(ws, rel)
        return {"kind": "file", "sha256": digest, "mode": info.mode, "size": info.size}
    except OSError as exc:
        return lost(f"could not be read ({exc.strerror})")
    except ToolError as exc:
        return lost(str(exc))


def change_since(ws: Workspace, rel: str, after: State | None) -> str | None:
    """Why `rel` no longer holds the state `after` its task left; None when it does."""
    if after is None or after["kind"] == "lost":
        return NOT_RECORDED
    now = state_now(ws, rel)
    if now == after:
        return None
    if now["kind"] == "missing":
        return "deleted since the task"
    if after["kind"] == "missing":
        return "made again since the task deleted it"
    return "changed since the task"


def find_conflicts(
    ws: Workspace,
    actions: Mapping[str, UndoAction],
    after: Mapping[str, State],
    later_task: Callable[[str], str | None],
) -> dict[str, Conflict]:
    """The paths of `actions` (what undo would do to each) that changed since the task,
    shallowest first, with those inside them; `later_task(path)` names a later task that
    changed one, if any."""
    found: dict[str, Conflict] = {}
    for rel in sorted(actions, key=lambda r: (r.count("/"), r)):
        action = actions[rel]
        if action == "lost":
            continue
        above = next((a for a in _ancestors(rel) if a in found), None)
        if above is not None:
            found[rel] = Conflict(rel, action, f"inside {above}, which changed since the task")
            continue
        reason = change_since(ws, rel, after.get(rel))
        if reason is None:
            continue
        later = later_task(rel)
        if later is not None and reason != NOT_RECORDED:
            reason = "changed by a later task"
        found[rel] = Conflict(rel, action, reason, later)
    return found


def overwritten(conflicts: Collection[str], overwrite: bool | Collection[str]) -> set[str]:
    """The conflicts to overwrite all the same: all, or those at or inside the paths given."""
    if overwrite is True:
        return set(conflicts)
    if not overwrite:
        return set()
    chosen = set(overwrite)
    return {rel for rel in conflicts if rel in chosen or chosen.intersection(_ancestors(rel))}


def with_folders(paths: Iterable[str]) -> set[str]:
    """The paths and every folder above them."""
    found: set[str] = set()
    for rel in paths:
        found.add(rel)
        found.update(_ancestors(rel))
    return found


def _ancestors(rel: str) -> list[str]:
    parts = rel.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts))]
