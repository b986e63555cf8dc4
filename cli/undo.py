"""`/undo [MESSAGE_ID] [--overwrite]`: list what undoing a task will do, ask, then say what it
did, which paths it left as they are because they changed since the task, and how to put
those back anyway."""

from __future__ import annotations

from collections.abc import Callable
from typing import TextIO

from cli.terminal import CliTerminal
from modules.undo.restore import Conflict, UndoPreview, UndoResult

OVERWRITE = "--overwrite"
VERBS = {"remove": "remove ", "restore": "restore", "lost": "cannot restore (not kept)"}


def undo_command(t: CliTerminal, arg: str) -> str:
    """Run `/undo`: ask before changing anything, then report."""
    return undo_dialog(
        t.out,
        t.stdin,
        arg,
        lambda message_id: t.services.journal.preview(t.conversation_id or "", message_id),
        t.undo,
    )


def undo_dialog(
    out: TextIO,
    stdin: TextIO,
    arg: str,
    preview_of: Callable[[str | None], UndoPreview],
    undo: Callable[[str | None, bool], UndoResult],
) -> str:
    """`/undo` in a local or a remote terminal: `preview_of(message_id)`, ask, `undo(...)`."""
    words = arg.split()
    overwrite = OVERWRITE in words
    ids = [word for word in words if word != OVERWRITE]
    if len(ids) > 1:
        raise ValueError(f"usage: /undo [MESSAGE_ID] [{OVERWRITE}]")
    message_id = ids[0] if ids else None
    preview = preview_of(message_id)
    if preview.files or (overwrite and preview.conflicts):
        out.write(_plan(preview, overwrite) + "\nUndo it? [y/N] ")
        out.flush()
        if stdin.readline().strip().lower() not in ("y", "yes"):
            return "undo cancelled; nothing changed"
    return _report(undo(message_id, overwrite))


def _plan(preview: UndoPreview, overwrite: bool) -> str:
    lines = [f"Undoing task {preview.task_id} will:"]
    lines += [f"  {VERBS[action]} {path}" for path, action in preview.files]
    conflicts = preview.conflicts
    if overwrite:
        lines += [f"  {VERBS[c.action]} {c.path} (overwriting: {c.reason})" for c in conflicts]
    elif conflicts:
        lines.append("and leave as they are:")
        lines += [f"  keep     {c.path}: {c.reason}" for c in conflicts]
    return "\n".join(lines)


def _report(result: UndoResult) -> str:
    removed = set(result.removed)
    lines = [result.message]
    lines += [
        f"  {'removed ' if path in removed else 'restored'} {path}" for path in result.restored
    ]
    lines += [f"  skipped  {reason}" for reason in result.skipped]
    lines += [f"  kept     {c.path}: {c.reason}" for c in result.conflicts]
    if result.conflicts:
        lines.append(_how_to_overwrite(result.task_id, result.conflicts))
    return "\n".join(lines)


def _how_to_overwrite(task_id: str | None, conflicts: list[Conflict]) -> str:
    them = "it" if len(conflicts) == 1 else "them"
    return f"To put {them} back anyway (losing the changes made since): /undo {task_id} {OVERWRITE}"
