"""The Socket.IO ops on a conversation's background processes (§4.1): list_processes,
process_output, stop_process, restart_process. The page's own acts: nothing asks. Scaled out,
they are applied where the conversation's sandbox session lives (web/session_ops.py)."""

from __future__ import annotations

import contextlib
from typing import Any

from flask_socketio import SocketIO

from modules.sandbox.factory import sessions_of
from modules.sandbox.session.background import ProcessLimitReached, UnknownProcess
from modules.sandbox.session.pool import SessionPool
from modules.sandbox.session.process import ProcessInfo
from modules.sandbox.session.records import ProcessRecord
from protocol.errors import failure
from protocol.requests import ConversationRef, ProcessOutputRequest, ProcessRef
from web.session_ops import SessionOps
from web.state import WebState

READ_BYTES = 64 * 1024


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
    """The ops as this process applies them, on the sessions it keeps."""

    def __init__(self, state: WebState) -> None:
        self.state = state
        self.services = state.services

    @property
    def pool(self) -> SessionPool | None:
        return sessions_of(self.services.runner)

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
    """The process ops, where the runner keeps sandbox sessions (not_configured elsewhere),
    applied where the conversation's session lives."""
    ops = ProcessOps(state)
    session_ops = SessionOps.of(socketio, state)
    session_ops.register("list_processes", ConversationRef, lambda msg, _: ops.list_processes(msg))
    session_ops.register(
        "process_output", ProcessOutputRequest, lambda msg, _: ops.process_output(msg)
    )
    session_ops.register("stop_process", ProcessRef, lambda msg, _: ops.stop_process(msg))
    session_ops.register("restart_process", ProcessRef, lambda msg, _: ops.restart_process(msg))
