"""Socket.IO handlers for managing conversations and the workspace around them: rename, delete
and search conversations, focus files, the memory, and what an undo would change."""

from __future__ import annotations

from typing import Any

from flask_socketio import SocketIO

from protocol.errors import failure
from protocol.requests import (
    ConversationRef,
    Focus,
    MemoryRef,
    Rename,
    SetMemory,
    UndoPreviewRequest,
)
from web.handlers import acked
from web.state import WebState


def register_manage_handlers(socketio: SocketIO, state: WebState) -> None:
    """The conversation list's and the workspace panel's events (docs/protocol.md §4)."""
    hub, services = state.hub, state.services

    def announce(payload: dict[str, Any]) -> None:
        socketio.emit("conversation_update", payload)

    hub.announce = announce

    @socketio.on("rename_conversation")
    @acked(Rename)
    def on_rename(msg: Rename) -> dict[str, Any]:
        title = " ".join(msg.title.split())
        if not title:
            return failure("bad_request", "a title needs at least one visible character")
        services.store.get(msg.conversation_id).set_title(title)
        announce({"id": msg.conversation_id, "title": title})
        return {"ok": True, "title": title}

    @socketio.on("delete_conversation")
    @acked(ConversationRef)
    def on_delete(msg: ConversationRef) -> dict[str, Any]:
        cid = msg.conversation_id
        services.store.get(cid)  # ConversationNotFound
        hub.forget(cid)  # TaskBusy while a task runs
        services.delete_conversation(cid)
        announce({"id": cid, "deleted": True})
        return {"ok": True}

    @socketio.on("focus_file")
    @acked(Focus)
    def on_focus(msg: Focus) -> dict[str, Any]:
        return {"ok": True, "focus": hub.get(msg.conversation_id).set_focus(msg.path, True)}

    @socketio.on("unfocus_file")
    @acked(Focus)
    def on_unfocus(msg: Focus) -> dict[str, Any]:
        return {"ok": True, "focus": hub.get(msg.conversation_id).set_focus(msg.path, False)}

    @socketio.on("undo_preview")
    @acked(UndoPreviewRequest)
    def on_undo_preview(msg: UndoPreviewRequest) -> dict[str, Any]:
        services.store.get(msg.conversation_id)
        preview = services.journal.preview(msg.conversation_id, msg.message_id)
        return {
            "ok": True,
            "message_id": preview.task_id,
            "undone": preview.undone,
            "files": [{"path": path, "action": action} for path, action in preview.files],
            "conflicts": [conflict.to_wire() for conflict in preview.conflicts],
        }

    @socketio.on("get_memory")
    @acked(MemoryRef)
    def on_get_memory(msg: MemoryRef) -> dict[str, Any]:
        memory, cid = services.memory, msg.conversation_id
        if cid is not None:
            services.store.get(cid)
        task = memory.read("task", cid) if cid else None
        return {"ok": True, "main": memory.read("main", ""), "task": task, "limit": memory.limit}

    @socketio.on("set_memory")
    @acked(SetMemory)
    def on_set_memory(msg: SetMemory) -> dict[str, Any]:
        memory, cid = services.memory, msg.conversation_id or ""
        if msg.scope == "task":
            if not cid:
                return failure("bad_request", "task memory belongs to a conversation: give its id")
            services.store.get(cid)
        size = len(msg.content.rstrip()) + 1
        if size > memory.limit:
            return failure(
                "invalid",
                f"Too long: {size:,} characters, the limit is "
                f"{memory.limit:,}. Shorten it, then save.",
            )
        text = memory.replace(msg.scope, cid, msg.content)
        return {"ok": True, "content": text, "limit": memory.limit}
