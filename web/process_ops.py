"""The Socket.IO ops on a conversation's background processes (§4.1): list_processes,
process_output, stop_process, restart_process. The page's own acts: nothing asks.

Scaled out, a conversation's sandbox session lives in one server process (the one holding its
session lease, web/cluster/): an op sent to another is applied there, as cancel and approve
are, and answered here as it answered it."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from flask_socketio import SocketIO
from pydantic import BaseModel

from modules.sandbox.factory import sessions_of
from modules.sandbox.session.background import ProcessLimitReached, UnknownProcess
from modules.sandbox.session.pool import SessionPool
from modules.sandbox.session.process import ProcessInfo
from modules.sandbox.session.records import ProcessRecord
from protocol.cluster import Answer, NotHere, ProcessAnswer, ProcessCommand
from protocol.errors import failure
from protocol.requests import ConversationRef, ProcessOutputRequest, ProcessRef
from web.handlers import acked
from web.state import WebState

READ_BYTES = 64 * 1024
RELAY_SECONDS = 10.0  # for the session's process to answer: a stop may take 4 s (TERM, KILL)


def process_wire(record: ProcessRecord, info: ProcessInfo | None = None) -> dict[str, Any]:
    """A process as list_processes gives it."""
    wire: dict[str, Any] = {
        "id": record.id,
        "pid": record.pid,
        "command": record.command,
        "origin": record.origin,
        "terminal": record.terminal,
        "started_at": record.started_at,
        "running": record.running,
        "ended_at": record.ended_at,
        "exit_code": record.exit_code,
        "signal": record.signal,
        "end_reason": record.end_reason,
        "ports": list(info.ports) if info is not None else [],
    }
    if info is not None:
        wire["output_end"] = info.output_end
    if info is not None and record.terminal:
        wire["foreground"] = info.foreground
    return wire


class ProcessOps:
    """The ops applied in this process (`apply`), or where the session lives (`answer`)."""

    def __init__(self, state: WebState) -> None:
        self.state = state
        self.services = state.services
        self.requests: dict[str, tuple[type[BaseModel], Callable[[Any], dict[str, Any]]]] = {
            "list_processes": (ConversationRef, self.list_processes),
            "process_output": (ProcessOutputRequest, self.process_output),
            "stop_process": (ProcessRef, self.stop_process),
            "restart_process": (ProcessRef, self.restart_process),
        }

    @property
    def pool(self) -> SessionPool | None:
        return sessions_of(self.services.runner)

    def answer(self, name: str, msg: ConversationRef) -> dict[str, Any]:
        """The op's ack: from the process holding the conversation's session when another
        does (and answers), else applied here."""
        self.state.hub.get(msg.conversation_id)  # not_found for an unknown conversation
        cluster = self.state.hub.cluster
        owner = cluster.session_owner(msg.conversation_id)
        if owner is not None:
            command = ProcessCommand(msg.conversation_id, name, msg.model_dump())
            answer = cluster.ask(owner, command, wait=RELAY_SECONDS)
            if isinstance(answer, ProcessAnswer):
                return answer.ack
        return self.requests[name][1](msg)

    def handle(self, command: ProcessCommand) -> Answer:
        """An op another process relayed: applied when the conversation's session lives here
        (NotHere otherwise: that process applies it itself)."""
        pool = self.pool
        known = self.requests.get(command.name)
        if known is None or pool is None or pool.existing(command.conversation_id) is None:
            return NotHere()
        model, apply = known
        msg = model.model_validate({**command.request, "conversation_id": command.conversation_id})
        return ProcessAnswer(apply(msg))

    def no_sessions(self) -> dict[str, Any]:
        kind = self.services.runner.kind
        return failure("not_configured", f"this server's sandbox ({kind}) keeps no background "
                       "processes")  # fmt: skip

    def list_processes(self, msg: ConversationRef) -> dict[str, Any]:
        seq = self.state.hub.get(msg.conversation_id).last_seq
        pool = self.pool
        if pool is None:
            return {"ok": True, "processes": [], "seq": seq}
        session = pool.existing(msg.conversation_id)
        if session is not None:
            listed = [process_wire(i.record, i) for i in session.processes()]
        else:
            listed = [process_wire(r) for r in pool.history(msg.conversation_id)]
        return {"ok": True, "processes": listed, "seq": seq}

    def process_output(self, msg: ProcessOutputRequest) -> dict[str, Any]:
        pool = self.pool
        if pool is None:
            return self.no_sessions()
        session = pool.existing(msg.conversation_id)
        if session is None:
            return failure("not_found", f"{msg.process_id} is not running in this server")
        try:
            out = session.peek(msg.process_id, msg.offset, READ_BYTES)
        except UnknownProcess as exc:
            return failure("not_found", str(exc))
        return {
            "ok": True,
            "text": out.text,
            "offset": out.offset + out.skipped,
            "skipped": out.skipped,
            "next_offset": out.next_offset,
            "output_end": out.info.output_end,
            "running": out.info.record.running,
            "exit_code": out.info.record.exit_code,
        }

    def stop_process(self, msg: ProcessRef) -> dict[str, Any]:
        pool = self.pool
        session = None if pool is None else pool.existing(msg.conversation_id)
        if session is None:
            return failure("not_found", f"{msg.process_id} is not running in this server")
        try:
            info = session.stop(msg.process_id)
        except UnknownProcess as exc:
            return failure("not_found", str(exc))
        return {"ok": True, "process": process_wire(info.record, info)}

    def restart_process(self, msg: ProcessRef) -> dict[str, Any]:
        pool = self.pool
        if pool is None:
            return self.no_sessions()
        old = {r.id: r for r in pool.history(msg.conversation_id)}.get(msg.process_id)
        if old is None:
            return failure("not_found", f"no process {msg.process_id} in this conversation")
        if old.terminal:
            return failure("bad_request", f"{msg.process_id} is a terminal: open a new one")
        session = pool.session(msg.conversation_id)
        if old.running:
            with contextlib.suppress(UnknownProcess):  # it ended meanwhile
                session.stop(msg.process_id)
        root = self.services.workspace.root
        try:
            out = session.start(old.command, root, settle=0, origin="user")
        except ProcessLimitReached as exc:
            return failure("busy", str(exc))
        return {"ok": True, "process": process_wire(out.info.record, out.info)}


def register_process_handlers(socketio: SocketIO, state: WebState) -> None:
    """The process ops, where the runner keeps sandbox sessions (not_configured elsewhere);
    those other processes relay here go to the same ops."""
    ops = ProcessOps(state)
    state.hub.process_commands = ops.handle

    for name, (model, _) in ops.requests.items():
        socketio.on(name)(acked(model)(_answered_by(ops, name)))


def _answered_by(ops: ProcessOps, name: str) -> Callable[[ConversationRef], dict[str, Any]]:
    def handler(msg: ConversationRef) -> dict[str, Any]:
        return ops.answer(name, msg)

    handler.__name__ = f"on_{name}"
    return handler
