"""Every Socket.IO handler: payloads validated in, `{ok, ...}` acks out, never a crash."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from flask import request
from flask_socketio import ConnectionRefusedError as SocketRefused
from flask_socketio import SocketIO, join_room
from pydantic import BaseModel

from history.conversation import LEAF
from modules.tools.proposals import ProposalError
from modules.workspace.file_tree import visible_changes
from protocol.errors import failure
from protocol.event_values import FileChange
from protocol.events import FileTree
from protocol.records import MessageRecord
from protocol.requests import (
    Approve,
    Cancel,
    Compact,
    ConversationRef,
    EditRef,
    Empty,
    Join,
    ListConversations,
    RevokeApproval,
    SendMessage,
    StatusRequest,
    UndoTask,
)
from web.payload_depth import TooDeep
from web.payloads import conversation_payload, conversations_payload, status_payload, tree_payload
from web.refusals import refused
from web.state import WebState
from web.transport.answers_first import AnswersFirst


def acked(model: type[BaseModel]) -> Callable[..., Callable[..., dict[str, Any]]]:
    """Validate the payload, turn every failure into an `{ok: false}` ack, never crash."""

    def decorate(function: Callable[[Any], dict[str, Any]]) -> Callable[..., dict[str, Any]]:
        @functools.wraps(function)
        def wrapper(*args: Any) -> dict[str, Any]:
            try:
                if len(args) > 1:
                    return failure("bad_request", "send one payload object")
                data = args[0] if args and args[0] is not None else {}
                if isinstance(data, TooDeep):
                    return failure("bad_request", TooDeep.message)
                return function(model.model_validate(data))
            except Exception as exc:
                return refused(exc, f"socket handler {function.__name__}")

        return wrapper

    return decorate


def register_socket_handlers(socketio: SocketIO, state: WebState) -> None:
    """Every Socket.IO event of docs/protocol.md §4."""
    _register_task_handlers(socketio, state)
    _register_reading_handlers(socketio, state)
    _register_review_handlers(socketio, state)


def _register_task_handlers(socketio: SocketIO, state: WebState) -> None:
    hub, services = state.hub, state.services
    answers = AnswersFirst()
    start_after_answers = answers.after_answers(socketio.start_background_task)

    @socketio.on("connect")
    def on_connect(auth: Any = None) -> bool:
        token = auth.get("token") if isinstance(auth, dict) else None
        if not state.token_ok(token):
            wait = state.throttle.wrong_token(request.remote_addr, "socket")
            if wait:
                details = {"code": "too_many_attempts", "retry_after": wait}
                raise SocketRefused("too many wrong tokens; wait", details)
            raise SocketRefused("wrong token", {"code": "wrong_token"})
        if isinstance(auth, dict) and auth.get("batch_deltas") is True:
            state.batched.add(request.sid)  # type: ignore[attr-defined]
        return True

    @socketio.on("disconnect")
    def on_disconnect(*_: Any) -> None:
        state.batched.discard(request.sid)  # type: ignore[attr-defined]

    @socketio.on("send_message")
    @acked(SendMessage)
    def on_send(msg: SendMessage) -> dict[str, Any]:
        with answers.answering():
            return _send(msg)

    def _send(msg: SendMessage) -> dict[str, Any]:
        def enter(record: MessageRecord) -> None:
            join_room(state.room_for(request.sid, record["conversation_id"]))  # type: ignore[attr-defined]

        # Absent: under the current leaf; an explicit null: a new root (editing the first message).
        parent = msg.parent_id if "parent_id" in msg.model_fields_set else LEAF
        attached = services.attachments.attach(msg.attachments) if msg.attachments else []
        record = hub.send(
            msg.conversation_id,
            msg.text,
            parent_id=parent,
            mode=msg.mode,
            approval=msg.approval,
            agent=msg.agent,
            skill=msg.skill,
            focus=msg.focus,
            attachments=[attachment.to_meta() for attachment in attached] or None,
            on_begun=enter,
            budget_override=msg.budget_override,
            run_in_background=start_after_answers,
        )
        return {
            "ok": True,
            "conversation_id": record["conversation_id"],
            "message_id": record["id"],
        }

    @socketio.on("cancel")
    @acked(Cancel)
    def on_cancel(msg: Cancel) -> dict[str, Any]:
        if hub.cancel(msg.conversation_id):
            return {"ok": True}
        return failure("not_running", "no task is running in this conversation")

    @socketio.on("approve")
    @acked(Approve)
    def on_approve(msg: Approve) -> dict[str, Any]:
        allowed = hub.approve(msg.conversation_id, msg.call_id, msg.approved, always=msg.always)
        if allowed is not None:
            return {"ok": True, "always_allowed": allowed}
        return failure("not_waiting", f"no call {msg.call_id!r} is waiting for approval")

    @socketio.on("revoke_approval")
    @acked(RevokeApproval)
    def on_revoke_approval(msg: RevokeApproval) -> dict[str, Any]:
        gate = hub.get(msg.conversation_id).gate
        if gate.revoke(msg.tool):
            return {"ok": True, "always_allowed": gate.allowed()}
        return failure("not_found", f"{msg.tool!r} is not always allowed in this conversation")

    @socketio.on("compact")
    @acked(Compact)
    def on_compact(msg: Compact) -> dict[str, Any]:
        terminal = hub.get(msg.conversation_id)
        cancel = terminal.begin_compaction(msg.instructions)  # NothingToCondense: invalid
        join_room(state.room_for(request.sid, msg.conversation_id))  # type: ignore[attr-defined]
        if cancel is not None:  # else the running task condenses before its next model call
            socketio.start_background_task(terminal.run_compaction, cancel, msg.instructions)
        return {"ok": True, "scheduled": cancel is None}

    @socketio.on("join")
    @acked(Join)
    def on_join(msg: Join) -> dict[str, Any]:
        sid = request.sid  # type: ignore[attr-defined]
        room = state.room_for(sid, msg.conversation_id)
        return {"ok": True, **hub.join(msg.conversation_id, msg.after_seq, sid, room)}


def _register_reading_handlers(socketio: SocketIO, state: WebState) -> None:
    @socketio.on("list_conversations")
    @acked(ListConversations)
    def on_list(msg: ListConversations) -> dict[str, Any]:
        return conversations_payload(state, msg.query)

    @socketio.on("get_conversation")
    @acked(ConversationRef)
    def on_get(msg: ConversationRef) -> dict[str, Any]:
        return conversation_payload(state, msg.conversation_id)

    @socketio.on("get_file_tree")
    @acked(Empty)
    def on_tree(_: Empty) -> dict[str, Any]:
        return tree_payload(state)

    @socketio.on("get_status")
    @acked(StatusRequest)
    def on_status(msg: StatusRequest) -> dict[str, Any]:
        return status_payload(state, msg.conversation_id)


def _register_review_handlers(socketio: SocketIO, state: WebState) -> None:
    """Undo a task; apply, discard and list the edits the agent proposed."""
    hub, services = state.hub, state.services

    def broadcast_changes(changes: list[FileChange]) -> None:
        shown = visible_changes(services.workspace.root, changes)
        if shown:
            socketio.emit("file_tree", FileTree(shown).to_wire())

    @socketio.on("undo_task")
    @acked(UndoTask)
    def on_undo(msg: UndoTask) -> dict[str, Any]:
        result = hub.get(msg.conversation_id).undo(msg.message_id, msg.overwrite)
        broadcast_changes(result.changes)
        return {
            "ok": True,
            "restored": result.restored,
            "removed": result.removed,
            "skipped": result.skipped,
            "conflicts": [conflict.to_wire() for conflict in result.conflicts],
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
        return {"ok": True, "change": FileTree([change]).to_wire()["changes"][0]}

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
