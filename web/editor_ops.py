"""The editor's Socket.IO ops (docs/protocol.md §4.1): open_file gives a workspace file with its
version, save_file writes a person's edit over the version it was made from, and every page's
tree hears of the change as it hears of the agent's."""

from __future__ import annotations

from typing import Any

from flask_socketio import SocketIO

from modules.workspace.editor_files import (
    EditorSaves,
    NeedsConfirmation,
    SaveConflict,
    open_for_edit,
)
from modules.workspace.file_tree import visible_changes
from protocol.errors import failure
from protocol.events import FileTree
from protocol.files import OpenFile, SaveFile
from web.handlers import acked
from web.state import WebState


def register_editor_handlers(socketio: SocketIO, state: WebState) -> None:
    """open_file and save_file, on the workspace every conversation shares."""
    workspace = state.services.workspace
    saves = EditorSaves(workspace)

    @socketio.on("open_file")
    @acked(OpenFile)
    def on_open_file(msg: OpenFile) -> dict[str, Any]:
        try:
            opened = open_for_edit(workspace, msg.path)
        except OSError as exc:  # missing, a folder, a fifo or device, or swapped outside
            return failure("not_found", f"{msg.path} is not a file ({exc.strerror})")
        return {"ok": True, "file": opened.to_wire()}

    @socketio.on("save_file")
    @acked(SaveFile)
    def on_save_file(msg: SaveFile) -> dict[str, Any]:
        try:
            saved, change = saves.save(
                msg.path, msg.content, msg.base_version, confirmed=msg.confirmed
            )
        except SaveConflict as exc:
            current = exc.current.to_wire() if exc.current else None
            return {**failure("conflict", str(exc)), "current": current}
        except NeedsConfirmation as exc:
            return {**failure("invalid", str(exc)), "needs_confirmation": True}
        state.services.journal.outside_write(saved.path)  # a command running now did not write it
        shown = visible_changes(workspace.root, [change])
        if shown:
            socketio.emit("file_tree", FileTree(shown).to_wire())
        return {"ok": True, "file": saved.to_wire()}
