"""The people's terminals of each conversation (a bounded number), each relayed to the clients
attached to it: `terminal` events from the offset each client has, sent as soon as there is
output (what piles up while one is sent goes in the next, at most BATCH_BYTES an event), and
the scrollback on attach."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from modules.sandbox.session.os_threads import original
from modules.sandbox.session.pool import SessionPool
from modules.sandbox.session.terminal import SessionTerminal

log = logging.getLogger(__name__)

MAX_TERMINALS = 8  # open at once in one conversation
BATCH_BYTES = 64 * 1024
SCROLLBACK_BYTES = 256 * 1024  # what an attach gives back (the ring holds as much)
IDLE_WAIT_SECONDS = 1.0

# (client sid, `terminal` event payload): False when that client is gone
Emit = Callable[[str, dict[str, Any]], bool]


class UnknownTerminal(LookupError):
    """The conversation has no open terminal of that id."""


class TooManyTerminals(Exception):
    """As many terminals as allowed are open in the conversation."""


@dataclass
class _Relayed:
    terminal: SessionTerminal
    conversation_id: str
    clients: dict[str, int] = field(default_factory=dict)  # sid -> offset sent up to
    closed: bool = False
    exit_sent: bool = False
    stack: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)


class Terminals:
    """Every open terminal of this server, by id (`tN` is unique per conversation, so keyed
    by conversation and id)."""

    def __init__(
        self,
        pool: SessionPool,
        cwd: Path,
        emit: Emit,
        start: Callable[[Callable[[], None]], Any],
    ) -> None:
        self.pool = pool
        self.cwd = cwd
        self.emit = emit
        self.start = start
        self._lock = original("threading").Lock()
        self._open: dict[tuple[str, str], _Relayed] = {}

    def open(self, conversation_id: str, rows: int, cols: int, sid: str) -> SessionTerminal:
        """A new terminal in the conversation's session, attached to client `sid`."""
        with self._lock:
            count = sum(1 for cid, _ in self._open if cid == conversation_id)
        if count >= MAX_TERMINALS:
            raise TooManyTerminals(f"at most {MAX_TERMINALS} terminals are open at once in a "
                                  "conversation: close one first")  # fmt: skip
        session = self.pool.session(conversation_id)
        terminal = SessionTerminal.open(session.sandbox, self.cwd, rows, cols)
        relayed = _Relayed(terminal, conversation_id, {sid: 0})
        relayed.stack.enter_context(session.attached())
        with self._lock:
            self._open[(conversation_id, terminal.id)] = relayed
        self.start(lambda: self._relay(relayed))
        return terminal

    def find(self, conversation_id: str, terminal_id: str) -> SessionTerminal:
        """An open terminal of the conversation (UnknownTerminal if none is so named)."""
        return self._find(conversation_id, terminal_id).terminal

    def listed(self, conversation_id: str) -> list[SessionTerminal]:
        """The conversation's open terminals."""
        with self._lock:
            return [r.terminal for (cid, _), r in self._open.items() if cid == conversation_id]

    def attach(self, conversation_id: str, terminal_id: str, sid: str) -> tuple[str, int, int]:
        """Client `sid` follows the terminal from now on: its scrollback (text, the offset it
        starts at, the offset live events go on from)."""
        relayed = self._find(conversation_id, terminal_id)
        terminal = relayed.terminal
        with self._lock:
            start = max(0, terminal.end - SCROLLBACK_BYTES)
            text = terminal.read(start, SCROLLBACK_BYTES)
            begin = start + text.skipped
            relayed.clients[sid] = text.next_offset
        return text.text, begin, text.next_offset

    def close(self, conversation_id: str, terminal_id: str) -> None:
        """End the terminal's shell and forget it."""
        relayed = self._find(conversation_id, terminal_id)
        relayed.terminal.close()
        self._forget(relayed)

    def close_all(self) -> None:
        """End every terminal (the server stops)."""
        with self._lock:
            every = list(self._open.values())
        for relayed in every:
            with contextlib.suppress(Exception):
                relayed.terminal.close()
            self._forget(relayed)

    def _find(self, conversation_id: str, terminal_id: str) -> _Relayed:
        with self._lock:
            relayed = self._open.get((conversation_id, terminal_id))
        if relayed is None:
            raise UnknownTerminal(f"no open terminal {terminal_id[:32]} in this conversation")
        return relayed

    def _forget(self, relayed: _Relayed) -> None:
        with self._lock:
            self._open.pop((relayed.conversation_id, relayed.terminal.id), None)
            relayed.closed = True
        relayed.stack.close()

    def _relay(self, relayed: _Relayed) -> None:
        """Send each attached client what it has not had, until the terminal ends."""
        terminal = relayed.terminal
        seen = 0
        while not relayed.closed:
            if not terminal.wait(seen, IDLE_WAIT_SECONDS) and not terminal.ended:
                continue
            seen = terminal.end
            try:
                self._send_all(relayed)
            except Exception:  # a client's trouble must not stop the terminal
                log.exception("relaying a terminal's output failed")
            if terminal.ended:
                self._ended(relayed)
                return

    def _send_all(self, relayed: _Relayed) -> None:
        with self._lock:
            sids = list(relayed.clients)
        for sid in sids:
            while self._send_one(relayed, sid):
                pass

    def _send_one(self, relayed: _Relayed, sid: str) -> bool:
        """Send client `sid` a batch of what it has not had; whether there was one."""
        with self._lock:
            offset = relayed.clients.get(sid)
        if offset is None:
            return False
        text = relayed.terminal.read(offset, BATCH_BYTES)
        with self._lock:
            if text.next_offset <= offset or relayed.clients.get(sid) != offset:
                return False  # nothing new, or attached again meanwhile
            relayed.clients[sid] = text.next_offset
        event = {"conversation_id": relayed.conversation_id, "terminal_id": relayed.terminal.id,
                 "offset": offset + text.skipped, "data": text.text}  # fmt: skip
        if text.skipped:
            event["skipped"] = text.skipped
        if self.emit(sid, event):
            return True
        with self._lock:
            relayed.clients.pop(sid, None)
        return False

    def _ended(self, relayed: _Relayed) -> None:
        """Its shell exited by itself (or the session ended): what it left running ends too,
        the clients get the rest of its output and the end, and it is forgotten."""
        with contextlib.suppress(Exception):
            relayed.terminal.hang_up()
        self._send_all(relayed)
        relayed.terminal.release()
        ended = {"conversation_id": relayed.conversation_id,
                 "terminal_id": relayed.terminal.id, "offset": relayed.terminal.end,
                 "data": "", "ended": True}  # fmt: skip
        for sid in list(relayed.clients):
            self.emit(sid, ended)
        self._forget(relayed)
