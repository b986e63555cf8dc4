"""The Socket.IO ops on a person's terminals (§4.1 terminal_open, terminal_attach,
terminal_input, terminal_resize, terminal_close, list_terminals) and their `terminal` events,
sent only to the clients that opened or attached the terminal. A terminal runs in the
conversation's sandbox session: a server without sessions refuses to open one."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flask import request
from flask_socketio import SocketIO

from core.terminals import Terminals, TooManyTerminals, UnknownTerminal
from modules.sandbox.factory import sessions_of
from modules.sandbox.runner import SandboxUnavailable
from protocol.errors import failure
from protocol.requests import ConversationRef
from protocol.terminals import (
    TerminalInput,
    TerminalOpen,
    TerminalOutput,
    TerminalRef,
    TerminalResize,
)
from web.handlers import acked
from web.state import WebState


def _guarded(function: Callable[[Any], dict[str, Any]]) -> Callable[[Any], dict[str, Any]]:
    """A terminal op's refusals (no such terminal, no session) as `{ok: false}` acks."""

    def wrapper(msg: Any) -> dict[str, Any]:
        try:
            return function(msg)
        except _NoSessions as exc:
            return failure("not_configured", str(exc))
        except UnknownTerminal as exc:
            return failure("not_found", str(exc))
        except TooManyTerminals as exc:
            return failure("busy", str(exc))
        except SandboxUnavailable as exc:
            return failure("unavailable", str(exc))

    wrapper.__name__ = function.__name__
    return wrapper


def register_terminal_handlers(socketio: SocketIO, state: WebState) -> None:
    """The terminal ops, where the runner keeps sandbox sessions (not_configured elsewhere);
    the terminals end with the server."""
    pool = sessions_of(state.services.runner)

    def emit(sid: str, output: TerminalOutput) -> bool:
        if not socketio.server.manager.is_connected(sid, "/"):
            return False
        socketio.emit("terminal", output.to_wire(), to=sid)
        return True

    terminals = None
    if pool is not None:
        root = state.services.workspace.root
        terminals = Terminals(pool, root, emit, socketio.start_background_task)
        state.closers.append(terminals.close_all)

    def ready(msg: ConversationRef) -> Terminals:
        state.hub.get(msg.conversation_id)  # not_found for an unknown conversation
        if terminals is None:
            kind = state.services.runner.kind
            raise _NoSessions(f"this server's sandbox ({kind}) has no sandbox sessions: a "
                              "terminal runs only in one (bubblewrap or docker)")  # fmt: skip
        return terminals

    @socketio.on("terminal_open")
    @acked(TerminalOpen)
    @_guarded
    def on_open(msg: TerminalOpen) -> dict[str, Any]:
        found = ready(msg)
        opened = found.open(msg.conversation_id, msg.rows, msg.cols, request.sid)  # type: ignore[attr-defined]
        return {"ok": True, "terminal_id": opened.id}

    @socketio.on("terminal_attach")
    @acked(TerminalRef)
    @_guarded
    def on_attach(msg: TerminalRef) -> dict[str, Any]:
        found = ready(msg)
        sid = request.sid  # type: ignore[attr-defined]
        back = found.attach(msg.conversation_id, msg.terminal_id, sid)
        return {
            "ok": True,
            "data": back.text,
            "offset": back.offset,
            "next_offset": back.next_offset,
        }

    @socketio.on("terminal_input")
    @acked(TerminalInput)
    @_guarded
    def on_input(msg: TerminalInput) -> dict[str, Any]:
        terminal = ready(msg).find(msg.conversation_id, msg.terminal_id)
        return {"ok": True, "written": terminal.write(msg.data.encode("utf-8", "replace"))}

    @socketio.on("terminal_resize")
    @acked(TerminalResize)
    @_guarded
    def on_resize(msg: TerminalResize) -> dict[str, Any]:
        ready(msg).find(msg.conversation_id, msg.terminal_id).resize(msg.rows, msg.cols)
        return {"ok": True}

    @socketio.on("terminal_close")
    @acked(TerminalRef)
    @_guarded
    def on_close(msg: TerminalRef) -> dict[str, Any]:
        ready(msg).close(msg.conversation_id, msg.terminal_id)
        return {"ok": True}

    @socketio.on("list_terminals")
    @acked(ConversationRef)
    def on_list(msg: ConversationRef) -> dict[str, Any]:
        state.hub.get(msg.conversation_id)
        listed = [] if terminals is None else terminals.listed(msg.conversation_id)
        wire = [{"terminal_id": t.id, "rows": t.size[0], "cols": t.size[1]} for t in listed]
        return {"ok": True, "terminals": wire}


class _NoSessions(Exception):
    """This server keeps no sandbox sessions."""
