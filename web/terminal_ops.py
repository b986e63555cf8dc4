"""The Socket.IO ops on a person's terminals (§4.1 terminal_open, terminal_attach,
terminal_input, terminal_resize, terminal_close, list_terminals) and their `terminal` events,
sent only to the clients that opened or attached the terminal. A terminal runs in the
conversation's sandbox session: a server without sessions refuses to open one. Scaled out,
the ops are applied where the session lives (web/session_ops.py), whose terminals send their
output to a client of another process through the Socket.IO message queue."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

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
from web.session_ops import SessionOps
from web.state import WebState


def _guarded(
    function: Callable[[Any, str], dict[str, Any]],
) -> Callable[[Any, str], dict[str, Any]]:
    """A terminal op's refusals (no such terminal, no session) as `{ok: false}` acks."""

    def wrapper(msg: Any, sid: str) -> dict[str, Any]:
        try:
            return function(msg, sid)
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
    """The terminal ops, where the runner keeps sandbox sessions (not_configured elsewhere),
    applied where the conversation's session lives; the terminals end with the server."""
    pool = sessions_of(state.services.runner)
    ops = SessionOps.of(socketio, state)
    remote: set[str] = set()  # clients of other processes that a relayed op attached

    def emit(sid: str, output: TerminalOutput) -> bool:
        if sid not in remote and not socketio.server.manager.is_connected(sid, "/"):
            return False
        socketio.emit("terminal", output.to_wire(), to=sid)  # through the message queue
        return True

    terminals = None
    if pool is not None:
        root = state.services.workspace.root
        terminals = Terminals(
            pool, root, emit, state.transport.clients_keeping_up, socketio.start_background_task
        )
        state.closers.append(terminals.close_all)

    def ready(msg: ConversationRef, sid: str) -> Terminals:
        state.hub.get(msg.conversation_id)  # not_found for an unknown conversation
        if terminals is None:
            kind = state.services.runner.kind
            raise _NoSessions(f"this server's sandbox ({kind}) has no sandbox sessions: a "
                              "terminal runs only in one (bubblewrap or docker)")  # fmt: skip
        if not socketio.server.manager.is_connected(sid, "/"):
            remote.add(sid)
        return terminals

    @_guarded
    def on_open(msg: TerminalOpen, sid: str) -> dict[str, Any]:
        found = ready(msg, sid)
        opened = found.open(msg.conversation_id, msg.rows, msg.cols, sid)
        state.hub.hold_session(msg.conversation_id)  # its ops come here from now on
        return {"ok": True, "terminal_id": opened.id}

    @_guarded
    def on_attach(msg: TerminalRef, sid: str) -> dict[str, Any]:
        back = ready(msg, sid).attach(msg.conversation_id, msg.terminal_id, sid)
        return {
            "ok": True,
            "data": back.text,
            "offset": back.offset,
            "next_offset": back.next_offset,
        }

    @_guarded
    def on_input(msg: TerminalInput, sid: str) -> dict[str, Any]:
        terminal = ready(msg, sid).find(msg.conversation_id, msg.terminal_id)
        return {"ok": True, "written": terminal.write(msg.data.encode("utf-8", "replace"))}

    @_guarded
    def on_resize(msg: TerminalResize, sid: str) -> dict[str, Any]:
        ready(msg, sid).find(msg.conversation_id, msg.terminal_id).resize(msg.rows, msg.cols)
        return {"ok": True}

    @_guarded
    def on_close(msg: TerminalRef, sid: str) -> dict[str, Any]:
        ready(msg, sid).close(msg.conversation_id, msg.terminal_id)
        return {"ok": True}

    def on_list(msg: ConversationRef, sid: str) -> dict[str, Any]:
        state.hub.get(msg.conversation_id)
        listed = [] if terminals is None else terminals.listed(msg.conversation_id)
        wire = [{"terminal_id": t.id, "rows": t.size[0], "cols": t.size[1]} for t in listed]
        return {"ok": True, "terminals": wire}

    ops.register("terminal_open", TerminalOpen, on_open)
    ops.register("terminal_attach", TerminalRef, on_attach)
    ops.register("terminal_input", TerminalInput, on_input)
    ops.register("terminal_resize", TerminalResize, on_resize)
    ops.register("terminal_close", TerminalRef, on_close)
    ops.register("list_terminals", ConversationRef, on_list)


class _NoSessions(Exception):
    """This server keeps no sandbox sessions."""
