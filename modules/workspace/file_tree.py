"""The workspace tree for `get_file_tree` and the system prompt; the root's path is ""."""

from __future__ import annotations

import stat
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from modules.results import ToolError
from modules.workspace.annotations import AnnotationStore
from modules.workspace.ignore import WorkspaceIgnore
from modules.workspace.paths import Workspace
from modules.workspace.safe_fs import SafeRoot
from protocol.event_values import FileChange


def scan_dir(fs: SafeRoot, ignore: WorkspaceIgnore, rel_dir: str) -> list[tuple[str, bool]]:
    """The shown entries of one workspace folder as (name, is_dir), folders first, then by name."""
    rules = ignore.folder(rel_dir)
    try:
        found = [(name, stat.S_ISDIR(st.st_mode)) for name, st in fs.list_dir(rel_dir)]
    except (OSError, ToolError):
        return []
    items = [(name, is_dir) for name, is_dir in found if not rules.hides(name, is_dir)]
    items.sort(key=lambda item: (not item[1], item[0].lower(), item[0]))
    return items


def walk_shown(fs: SafeRoot, ignore: WorkspaceIgnore, base: str) -> Iterator[tuple[str, bool]]:
    """(workspace path, is_dir) of everything shown under the folder `base`, breadth-first."""
    queue = deque([base])
    while queue:
        folder = queue.popleft()
        for name, is_dir in scan_dir(fs, ignore, folder):
            path = f"{folder}/{name}" if folder else name
            if is_dir:
                queue.append(path)
            yield path, is_dir


def file_tree(
    workspace: Workspace, annotations: AnnotationStore, *, max_entries: int = 5000
) -> dict[str, Any]:
    """Nested {name, path, is_dir, children?, annotation?}; if cut, the root has `truncated: true`
    and `entries`, how many are listed.

    Folders are filled breadth-first, so a cut keeps the upper levels whole. What
    modules.workspace.ignore leaves out (.gitignore'd paths, node_modules, virtualenvs, caches)
    is not shown. Symbolic links are listed as leaves and never followed. Notes on paths that no
    longer exist are pruned.
    """
    notes = annotations.all()
    annotations.prune({p for p in notes if _exists(workspace, p)})
    root: dict[str, Any] = {"name": workspace.root.name, "path": "", "is_dir": True}
    root["children"] = []
    ignore = WorkspaceIgnore(workspace.root)
    queue: deque[tuple[str, dict[str, Any]]] = deque([("", root)])
    count = 0
    while queue:
        rel_dir, node = queue.popleft()
        for name, is_dir in scan_dir(workspace, ignore, rel_dir):
            if count >= max_entries:
                root["truncated"], root["entries"] = True, count
                return root
            count += 1
            rel = f"{rel_dir}/{name}" if rel_dir else name
            child: dict[str, Any] = {"name": name, "path": rel, "is_dir": is_dir}
            if rel in notes:
                child["annotation"] = notes[rel]
            if is_dir:
                child["children"] = []
                queue.append((rel, child))
            node["children"].append(child)
    return root


def visible_changes(root: Path, changes: list[FileChange]) -> list[FileChange]:
    """The changes the tree shows: those to what modules.workspace.ignore hides are dropped,
    and a move out of sight becomes a deletion, one into sight a creation."""
    ignore = WorkspaceIgnore(root)
    shown = []
    for change in changes:
        hidden = bool(change.path) and ignore.hides(change.path, change.is_dir)
        if change.event != "moved" or not change.dest_path:
            if not hidden:
                shown.append(change)
            continue
        dest_hidden = ignore.hides(change.dest_path, change.is_dir)
        if hidden and not dest_hidden:
            shown.append(FileChange("created", change.dest_path, is_dir=change.is_dir))
        elif dest_hidden and not hidden:
            shown.append(FileChange("deleted", change.path, is_dir=change.is_dir))
        elif not hidden:
            shown.append(change)
    return shown


def describe_tree(
    workspace: Workspace, annotations: AnnotationStore, *, max_entries: int = 300
) -> str:
    """An indented text listing of the tree with its notes, for the system prompt."""
    tree = file_tree(workspace, annotations, max_entries=max_entries)
    lines: list[str] = []
    _render(tree["children"], 0, lines)
    if not lines:
        lines.append("(the workspace is empty)")
    if tree.get("truncated"):
        lines.append(f"… (listing cut at {max_entries} entries; use list_files to see more)")
    return "\n".join(lines)


def _render(children: list[dict[str, Any]], depth: int, lines: list[str]) -> None:
    for child in children:
        name = child["name"] + ("/" if child["is_dir"] else "")
        note = f"  — {child['annotation']}" if "annotation" in child else ""
        lines.append(f"{'  ' * depth}{name}{note}")
        if child["is_dir"]:
            _render(child["children"], depth + 1, lines)


def _exists(workspace: Workspace, rel: str) -> bool:
    try:
        return workspace.lstat(rel) is not None
    except (OSError, ToolError):
        return False
