"""The ops on what runs in a conversation's sandbox session (§4.1: its processes and its
terminals), applied where the session lives.

Scaled out, a conversation's sandbox session lives in one server process (the one holding its
session lease, web/cluster/): an op sent to another is applied there, as cancel and approve
are, and answered here as it answered it; with no holder, or none answering, it is applied
here. An op names the client that sent it (its sid), for a terminal's output goes to the
clients attached to it, of whichever process."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flask import request
from flask_socketio import SocketIO
from pydantic import BaseModel

from modules.sandbox.factory import sessions_of
from protocol.cluster import Answer, NotHere, ProcessAnswer, ProcessCommand
from protocol.requests import ConversationRef
from web.handlers import acked
from web.state import WebState

RELAY_SECONDS = 10.0  # for the session's process to answer: a stop may take 4 s (TERM, KILL)

Apply = Callable[[Any, str], dict[str, Any]]  # (the op's payload, the sid of who sent it)


class SessionOps:
    """The session ops, by name; this process's answerer of those other processes relay."""

    def __init__(self, socketio: SocketIO, state: WebState) -> None:
        self.socketio = socketio
        self.state = state
        self.ops: dict[str, tuple[type[BaseModel], Apply]] = {}
        state.hub.process_commands = self.handle

    @classmethod
    def of(cls, socketio: SocketIO, state: WebState) -> SessionOps:
        """The app's one SessionOps (made by the first to ask)."""
        if not isinstance(state.session_ops, SessionOps):
            state.session_ops = cls(socketio, state)
        return state.session_ops

    def register(self, name: str, model: type[ConversationRef], apply: Apply) -> None:
        """Answer the op `name` with `apply`, here or where the session lives."""
        self.ops[name] = (model, apply)

        def handler(msg: ConversationRef) -> dict[str, Any]:
            return self.answer(name, msg, request.sid)  # type: ignore[attr-defined]

        handler.__name__ = f"on_{name}"
        self.socketio.on(name)(acked(model)(handler))

    def answer(self, name: str, msg: ConversationRef, sid: str) -> dict[str, Any]:
        """The op's ack: from the process holding the conversation's session when another
        does (and answers), else applied here."""
        self.state.hub.get(msg.conversation_id)  # not_found for an unknown conversation
        cluster = self.state.hub.cluster
        owner = cluster.session_owner(msg.conversation_id)
        if owner is not None:
            command = ProcessCommand(msg.conversation_id, name, msg.model_dump(), sid)
            answer = cluster.ask(owner, command, wait=RELAY_SECONDS)
            if isinstance(answer, ProcessAnswer):
                return answer.ack
        return self.ops[name][1](msg, sid)

    def handle(self, command: ProcessCommand) -> Answer:
        """An op another process relayed: applied when the conversation's session lives here
        (NotHere otherwise: that process applies it itself)."""
        pool = sessions_of(self.state.services.runner)
        known = self.ops.get(command.name)
        if known is None or pool is None or pool.existing(command.conversation_id) is None:
            return NotHere()
        model, apply = known
        msg = model.model_validate({**command.request, "conversation_id": command.conversation_id})
        return ProcessAnswer(apply(msg, command.sid))
