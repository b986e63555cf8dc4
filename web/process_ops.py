"""The Socket.IO ops on a conversation's background processes (§4.1): list_processes,
process_output, stop_process, restart_process. The page's own acts: nothing asks."""

from __future__ import annotations

import contextlib
from typing import Any

from flask_socketio import SocketIO

from modules.sandbox.factory import sessions_of
from modules.sandbox.session.background import ProcessLimitReached, UnknownProcess
from modules.sandbox.session.process import ProcessInfo
from modules.sandbox.session.records import ProcessRecord
from protocol.errors import failure
from protocol.requests import ConversationRef, ProcessOutputRequest, ProcessRef
from web.handlers import acked
from web.state import WebState

READ_BYTES = 64 * 1024


def process_wire(record: ProcessRecord, info: ProcessInfo | None = None) -> dict[str, Any]:
    """A process as list_processes gives it."""
    wire: dict[str, Any] = {
        "id": record.id,
        "pid": record.pid,
        "command": record.command,
        "origin": record.origin,
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
    return wire


def register_process_handlers(socketio: SocketIO, state: WebState) -> None:
    """The process ops, where the runner keeps sandbox sessions (not_configured elsewhere)."""
    services = state.services

    def no_sessions() -> dict[str, Any]:
        return failure(
            "not_configured",
            f"this server's sandbox ({services.runner.kind}) keeps no background processes",
        )

    def missing(exc: Exception) -> dict[str, Any]:
        return failure("not_found", str(exc))

    @socketio.on("list_processes")
    @acked(ConversationRef)
    def on_list_processes(msg: ConversationRef) -> dict[str, Any]:
        terminal = state.hub.get(msg.conversation_id)  # not_found for an unknown one
        found = sessions_of(services.runner)
        if found is None:
            return {"ok": True, "processes": [], "seq": terminal.last_seq}
        session = found.existing(msg.conversation_id)
        if session is not None:
            listed = [process_wire(i.record, i) for i in session.processes()]
        else:
            listed = [process_wire(r) for r in found.history(msg.conversation_id)]
        return {"ok": True, "processes": listed, "seq": terminal.last_seq}

    @socketio.on("process_output")
    @acked(ProcessOutputRequest)
    def on_process_output(msg: ProcessOutputRequest) -> dict[str, Any]:
        state.hub.get(msg.conversation_id)
        found = sessions_of(services.runner)
        if found is None:
            return no_sessions()
        session = found.existing(msg.conversation_id)
        if session is None:
            return failure("not_found", f"{msg.process_id} is not running in this server")
        try:
            out = session.peek(msg.process_id, msg.offset, READ_BYTES)
        except UnknownProcess as exc:
            return missing(exc)
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

    @socketio.on("stop_process")
    @acked(ProcessRef)
    def on_stop_process(msg: ProcessRef) -> dict[str, Any]:
        state.hub.get(msg.conversation_id)
        found = sessions_of(services.runner)
        session = None if found is None else found.existing(msg.conversation_id)
        if session is None:
            return failure("not_found", f"{msg.process_id} is not running in this server")
        try:
            info = session.stop(msg.process_id)
        except UnknownProcess as exc:
            return missing(exc)
        return {"ok": True, "process": process_wire(info.record, info)}

    @socketio.on("restart_process")
    @acked(ProcessRef)
    def on_restart_process(msg: ProcessRef) -> dict[str, Any]:
        state.hub.get(msg.conversation_id)
        found = sessions_of(services.runner)
        if found is None:
            return no_sessions()
        old = {r.id: r for r in found.history(msg.conversation_id)}.get(msg.process_id)
        if old is None:
            return failure("not_found", f"no process {msg.process_id} in this conversation")
        session = found.session(msg.conversation_id)
        if old.running:
            with contextlib.suppress(UnknownProcess):  # it ended meanwhile
                session.stop(msg.process_id)
        try:
            out = session.start(old.command, services.workspace.root, settle=0, origin="user")
        except ProcessLimitReached as exc:
            return failure("busy", str(exc))
        return {"ok": True, "process": process_wire(out.info.record, out.info)}
