"""File tools: create, read, modify, delete, rename and list, confined to the workspace."""

from __future__ import annotations

import contextlib
import stat
from collections.abc import Iterator
from fnmatch import fnmatch
from itertools import islice
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from modules.results import PlannedWrite, ToolError, ToolOutput
from modules.tools.tool_context import ToolContext
from modules.workspace.file_tree import walk_shown
from modules.workspace.ignore import WorkspaceIgnore
from modules.workspace.paths import Workspace
from modules.workspace.safe_fs import NotRegular, SafeRoot
from modules.workspace.text_files import (
    EDIT_LIMIT_BYTES,
    line_count,
    modified_text,
    read_text,
    split_lines,
)
from protocol.event_values import FileChange

READ_LIMIT_BYTES = 2_000_000
LIST_LIMIT = 500
CR = "\r"


def _before_change(ctx: ToolContext, path: Path) -> None:
    """Let the task's undo journal keep what is at `path` before it changes."""
    if ctx.journal is not None:
        ctx.journal.before_change(path)


def _new_folders(ctx: ToolContext, folder: str) -> list[FileChange]:
    """Create the workspace folder `folder` and its missing parents; one change per new one."""
    changes = []
    for rel in ctx.workspace.missing_folders(folder):
        _before_change(ctx, ctx.workspace.root / rel)
        ctx.workspace.mkdir(rel)
        changes.append(FileChange("created", rel, is_dir=True))
    return changes


def _parent(rel: str) -> str:
    return rel.rpartition("/")[0]


def written_path(
    workspace: Workspace, args: CreateFileArgs | CreateFolderArgs | ModifyFileArgs
) -> list[str]:
    """The path create_file, modify_file or create_folder changes, links on its way followed."""
    return [workspace.relative(workspace.resolve(args.path, for_write=True))]


def removed_path(workspace: Workspace, args: DeleteFileArgs) -> list[str]:
    """The path delete_file removes: a final link itself, not what it points to."""
    return [_unfollowed(workspace, args.path)]


def moved_paths(workspace: Workspace, args: RenameFileArgs) -> list[str]:
    """Both ends of a rename_file: what goes, and where it lands."""
    return [_unfollowed(workspace, args.old_path), _unfollowed(workspace, args.new_path)]


def _unfollowed(workspace: Workspace, path: str) -> str:
    return workspace.relative(workspace.resolve(path, for_write=True, follow_symlinks=False))


class CreateFileArgs(BaseModel):
    path: str = Field(description="File path relative to the workspace, e.g. 'src/app.py'.")
    content: str = Field("", description="The complete text to write into the file.")
    annotation: str | None = Field(
        None, max_length=500, description="Optional one-line note on what the file is for."
    )


def plan_create(workspace: Workspace, args: CreateFileArgs) -> PlannedWrite:
    """What create_file would write, and over what (raises ToolError when it cannot)."""
    target = workspace.resolve(args.path, for_write=True)
    rel = workspace.relative(target)
    info = workspace.lstat(rel, follow=True)
    if info is not None and stat.S_ISDIR(info.st_mode):
        raise ToolError(f"{rel} is an existing folder; choose a file path.")
    if info is not None and not stat.S_ISREG(info.st_mode):
        raise NotRegular(rel, info.st_mode)
    existed = info is not None
    old = None
    if existed:
        with contextlib.suppress(ToolError):  # binary or too large: replaced unseen
            old = read_text(workspace, rel, EDIT_LIMIT_BYTES, strict=True)
    verb = "Overwrote existing file" if existed else "Created"
    size = f"{line_count(args.content)} lines, {len(args.content)} characters"
    return PlannedWrite(target, rel, existed, old, args.content, f"{verb} {rel} ({size}).")


def create_file(ctx: ToolContext, args: CreateFileArgs) -> ToolOutput:
    """Create a file with the given content (missing folders are created too).

    If the file already exists it is overwritten with the new content; the result says so.
    """
    plan = plan_create(ctx.workspace, args)
    changes = _new_folders(ctx, _parent(plan.rel))
    _before_change(ctx, plan.path)
    ctx.workspace.write_atomic(plan.rel, plan.new.encode("utf-8"))
    if args.annotation is not None:
        ctx.annotations.set(plan.rel, args.annotation)
    changes.append(FileChange("modified" if plan.existed else "created", plan.rel))
    return ToolOutput(plan.summary, changes)


class CreateFolderArgs(BaseModel):
    path: str = Field(description="Folder path relative to the workspace; parents are created.")


def create_folder(ctx: ToolContext, args: CreateFolderArgs) -> ToolOutput:
    """Create a folder (and any missing parent folders)."""
    target = ctx.workspace.resolve(args.path, for_write=True)
    rel = ctx.workspace.relative(target)
    info = ctx.workspace.lstat(rel, follow=True)
    if info is not None and stat.S_ISDIR(info.st_mode):
        return ToolOutput(f"Folder {rel} already exists.")
    if info is not None:
        raise ToolError(f"{rel} already exists as a file.")
    return ToolOutput(f"Created folder {rel}.", _new_folders(ctx, rel))


class ReadFileArgs(BaseModel):
    path: str = Field(description="File path relative to the workspace.")
    start_line: int | None = Field(None, ge=1, description="First line to show (1-based).")
    end_line: int | None = Field(None, ge=1, description="Last line to show, inclusive.")


def read_file(ctx: ToolContext, args: ReadFileArgs) -> str:
    """Read a text file; each line is shown with its line number and a tab before it.

    Give start_line/end_line to read part of a long file. Long output stops at a line
    boundary and says which start_line to use to read on.
    """
    path = ctx.workspace.resolve(args.path)
    rel = ctx.workspace.relative(path)
    start, end = args.start_line or 1, args.end_line
    if end is not None and end < start:
        raise ToolError(f"end_line ({end}) is before start_line ({start}).")
    limit = READ_LIMIT_BYTES if args.start_line is None and end is None else EDIT_LIMIT_BYTES
    lines = split_lines(read_text(ctx.workspace, rel, limit))
    total = len(lines)
    if start > max(total, 1):
        raise ToolError(f"start_line {start} is past the end of {rel} ({total} lines).")
    end = min(end or total, total)
    budget = ctx.settings.output_limit_chars - 300
    shown: list[str] = []
    for number, line in enumerate(islice(lines, start - 1, end), start):
        entry = f"{number:>6}\t{line.removesuffix(CR)}"
        if shown and budget - len(entry) - 1 < 0:
            more = f"read on with start_line={number}"
            return "\n".join([f"{rel} (lines {start}-{number - 1} of {total}; {more})", *shown])
        budget -= len(entry) + 1
        shown.append(entry)
    if not shown:
        return f"{rel} is empty."
    return "\n".join([f"{rel} (lines {start}-{end} of {total})", *shown])


class ModifyFileArgs(BaseModel):
    path: str = Field(description="Existing file path relative to the workspace.")
    operation: Literal["append", "replace", "clear"] = Field(
        description="'append' adds content at the end; 'replace' swaps old_text for new_text; "
        "'clear' empties the file."
    )
    content: str | None = Field(
        None,
        description="For 'append': text added exactly as given (include a leading newline "
        "if the file does not end with one).",
    )
    old_text: str | None = Field(
        None,
        description="For 'replace': the exact current text, which must occur exactly once "
        "(copy it from read_file without the line numbers).",
    )
    new_text: str | None = Field(None, description="For 'replace': the text to put in its place.")


def plan_modify(workspace: Workspace, args: ModifyFileArgs) -> PlannedWrite:
    """What modify_file would write, and over what (raises ToolError when it cannot)."""
    path = workspace.resolve(args.path, for_write=True)
    rel = workspace.relative(path)
    text = read_text(workspace, rel, EDIT_LIMIT_BYTES, strict=True)
    new, summary = modified_text(
        text,
        rel,
        args.operation,
        content=args.content,
        old_text=args.old_text,
        new_text=args.new_text,
    )
    return PlannedWrite(path, rel, True, text, new, summary)


def modify_file(ctx: ToolContext, args: ModifyFileArgs) -> ToolOutput:
    """Change an existing file: append text, replace one unique piece of text, or clear it."""
    plan = plan_modify(ctx.workspace, args)
    _before_change(ctx, plan.path)
    ctx.workspace.write_atomic(plan.rel, plan.new.encode("utf-8"))
    return ToolOutput(plan.summary, [FileChange("modified", plan.rel)])


class DeleteFileArgs(BaseModel):
    path: str = Field(description="File or folder path relative to the workspace.")


def delete_file(ctx: ToolContext, args: DeleteFileArgs) -> ToolOutput:
    """Delete a file, or a folder with everything in it."""
    path = ctx.workspace.resolve(args.path, for_write=True, follow_symlinks=False)
    rel = ctx.workspace.relative(path)
    info = ctx.workspace.lstat(rel)
    if info is None:
        raise ToolError(f"No such file or folder: {rel}.")
    is_dir = stat.S_ISDIR(info.st_mode)
    _before_change(ctx, path)
    ctx.workspace.remove(rel)
    ctx.annotations.drop(rel)
    ctx.focus.drop(rel)
    kind = "folder" if is_dir else "file"
    return ToolOutput(f"Deleted {kind} {rel}.", [FileChange("deleted", rel, is_dir=is_dir)])


class RenameFileArgs(BaseModel):
    old_path: str = Field(description="Current file or folder path relative to the workspace.")
    new_path: str = Field(description="New path relative to the workspace; must not exist yet.")


def rename_file(ctx: ToolContext, args: RenameFileArgs) -> ToolOutput:
    """Rename or move a file or folder; missing parent folders of the new path are created."""
    ws = ctx.workspace
    source = ws.resolve(args.old_path, for_write=True, follow_symlinks=False)
    dest = ws.resolve(args.new_path, for_write=True, follow_symlinks=False)
    old, new = ws.relative(source), ws.relative(dest)
    info = ws.lstat(old)
    if info is None:
        raise ToolError(f"No such file or folder: {old}.")
    if ws.lstat(new) is not None:
        raise ToolError(f"{new} already exists; delete it first or choose another name.")
    is_dir = stat.S_ISDIR(info.st_mode)
    if is_dir and dest.is_relative_to(source):
        raise ToolError(f"Cannot move folder {old} into itself ({new}).")
    changes = _new_folders(ctx, _parent(new))
    if ctx.journal is not None:
        ctx.journal.before_move(source, dest)
    try:
        ws.rename(old, new)
    except FileExistsError:
        raise ToolError(f"{new} already exists; delete it first or choose another name.") from None
    ctx.annotations.move(old, new)
    ctx.focus.move(old, new)
    changes.append(FileChange("moved", old, is_dir=is_dir, dest_path=new))
    return ToolOutput(f"Renamed {old} to {new}.", changes)


class ListFilesArgs(BaseModel):
    directory: str = Field(".", description="Folder to list, relative to the workspace.")
    pattern: str | None = Field(
        None,
        description="Optional glob such as '*.py' or 'src/*.ts', matched against each "
        "name and each path relative to the directory.",
    )


def list_files(ctx: ToolContext, args: ListFilesArgs) -> str:
    """List files and folders under a folder, recursively, as workspace-relative paths.

    Folders end with '/'. Files and folders matched by the workspace's .gitignore files are
    left out, and so are .git, node_modules, virtualenvs, __pycache__ and other caches, and
    editor swap files, unless you name such a folder as `directory`; symbolic links are shown
    but not followed; annotations are shown after ' — '.
    """
    base = ctx.workspace.resolve(args.directory)
    rel_base = ctx.workspace.relative(base)
    info = ctx.workspace.lstat(rel_base, follow=True)
    if info is None or not stat.S_ISDIR(info.st_mode):
        raise ToolError(f"{args.directory} is not a folder.")
    notes = ctx.annotations.all()
    walk = _walk(ctx.workspace, WorkspaceIgnore(ctx.workspace.root), rel_base, args.pattern)
    entries = list(islice(walk, LIST_LIMIT + 1))
    lines = []
    for path, is_dir in entries[:LIST_LIMIT]:
        shown = path + "/" if is_dir else path
        lines.append(f"{shown}  — {notes[path]}" if path in notes else shown)
    where = rel_base or "the workspace"
    if not lines:
        return f"No entries in {where}" + (f" match {args.pattern!r}." if args.pattern else ".")
    if len(entries) > LIST_LIMIT:
        lines.append(f"… stopped at {LIST_LIMIT} entries; narrow with directory or pattern.")
    return f"{where}:\n" + "\n".join(lines)


def _walk(
    fs: SafeRoot, ignore: WorkspaceIgnore, base: str, pattern: str | None
) -> Iterator[tuple[str, bool]]:
    """(workspace path, is_dir) for everything shown under the folder `base` that `pattern`
    matches (its name, or its path from `base`), breadth-first."""
    glob = pattern.removeprefix("**/") if pattern else None
    cut = len(base) + 1 if base else 0
    for path, is_dir in walk_shown(fs, ignore, base):
        name = path.rsplit("/", 1)[-1]
        if glob is None or fnmatch(name, glob) or fnmatch(path[cut:], glob):
            yield path, is_dir
