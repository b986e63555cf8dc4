"""Socket.IO payloads and acknowledgements: validated in, `{ok, ...}` out, never a crash."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from flask_socketio import SocketIO
from pydantic import BaseModel, Field, ValidationError

from core.events import FileChange, FileTree
from core.main_terminal import TaskBusy
from modules.proposals import ProposalError
from utils.conversation_store import ConversationNotFound
from utils.settings import Approval, Mode

if TYPE_CHECKING:
    from web_server import WebState

log = logging.getLogger(__name__)


class SendMessage(BaseModel):
    conversation_id: str | None = None
    text: str = Field(min_length=1, max_length=200_000)
    mode: Mode | None = None
    parent_id: str | None = None
    approval: Approval | None = None


class ConversationRef(BaseModel):
    conversation_id: str


class Cancel(ConversationRef):
    pass


class Approve(ConversationRef):
    call_id: str
    approved: bool
    always: bool = False


class UndoTask(ConversationRef):
    message_id: str | None = None


class EditRef(ConversationRef):
    proposal_id: str


class Join(ConversationRef):
    after_seq: int = 0


class Empty(BaseModel):
    pass


def failure(code: str, message: str) -> dict[str, Any]:
    return {"ok": False, "error": {"code": code, "message": message}}


def acked(model: type[BaseModel]) -> Callable[..., Callable[..., dict[str, Any]]]:
    """Validate the payload, turn every failure into an `{ok: false}` ack, never crash."""

    def decorate(function: Callable[[Any], dict[str, Any]]) -> Callable[..., dict[str, Any]]:
        @functools.wraps(function)
        def wrapper(*args: Any) -> dict[str, Any]:
            try:
                if len(args) > 1:
                    return failure("bad_request", "send one payload object")
                data = args[0] if args and args[0] is not None else {}
                return function(model.model_validate(data))
            except ValidationError as exc:
                problems = "; ".join(
                    f"{'.'.join(map(str, e['loc'])) or 'payload'}: {e['msg']}" for e in exc.errors()
                )
                return failure("bad_request", problems)
            except ProposalError as exc:
                return failure(exc.code, str(exc))
            except ConversationNotFound as exc:
                return failure("not_found", str(exc))
            except TaskBusy as exc:
                return failure("busy", str(exc))
            except KeyError as exc:
                return failure("not_found", str(exc.args[0] if exc.args else exc))
            except Exception as exc:
                log.exception("socket handler %s failed", function.__name__)
                return failure("internal_error", f"{type(exc).__name__}: {exc}")

        return wrapper

    return decorate


def register_review_handlers(socketio: SocketIO, state: WebState) -> None:
    """Undo a task; apply, discard and list the edits the agent proposed."""
    hub, services = state.hub, state.services

    def broadcast_changes(changes: list[FileChange]) -> None:
        if changes:
            socketio.emit("file_tree", FileTree(changes).payload())

    @socketio.on("undo_task")
    @acked(UndoTask)
    def on_undo(msg: UndoTask) -> dict[str, Any]:
        result = hub.get(msg.conversation_id).undo(msg.message_id)
        broadcast_changes(result.changes)
        return {
            "ok": True,
            "restored": result.restored,
            "skipped": result.skipped,
            "message": result.message,
        }

    def own_proposal(msg: EditRef) -> str:
        proposal = services.proposals.get(msg.proposal_id)
        if proposal is None or proposal.conversation_id != msg.conversation_id:
            raise ProposalError(f"no pending edit {msg.proposal_id!r} here", "not_found")
        return proposal.id

    @socketio.on("apply_edit")
    @acked(EditRef)
    def on_apply_edit(msg: EditRef) -> dict[str, Any]:
        change = services.proposals.apply_proposal(own_proposal(msg))
        broadcast_changes([change])
        return {"ok": True, "change": FileTree([change]).payload()["changes"][0]}

    @socketio.on("discard_edit")
    @acked(EditRef)
    def on_discard_edit(msg: EditRef) -> dict[str, Any]:
        services.proposals.discard_proposal(own_proposal(msg))
        return {"ok": True}

    @socketio.on("list_edits")
    @acked(ConversationRef)
    def on_list_edits(msg: ConversationRef) -> dict[str, Any]:
        services.store.get(msg.conversation_id)
        edits = [
            {"id": p.id, "path": p.path, "diff": p.diff, "created_at": p.created_at}
            for p in services.proposals.pending(msg.conversation_id)
        ]
        return {"ok": True, "edits": edits}
