"""The people's terminals of each conversation (a bounded number), each relayed to the clients
attached to it by a task of its own: every read of its PTY is a `terminal` event sent at once
(a keystroke's echo waits behind nothing; under a flood a read carries what piled up, at most
64 KiB, and nothing is read while an attached client is far behind: what runs in it waits on
its writes), and an attach gives the scrollback first."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from modules.sandbox.session.os_threads import new_condition, original, sleep, wait_for
from modules.sandbox.session.pool import SessionPool
from modules.sandbox.session.terminal import Output, SessionTerminal
from protocol.terminals import TerminalOutput

log = logging.getLogger(__name__)

MAX_TERMINALS = 8  # open at once in one conversation
LOOK_SECONDS = 0.5  # how often a quiet terminal's relay looks whether its shell exited
END_SECONDS = 10.0  # for a relay to come to its terminal's end after a hang-up
BEHIND_LOOK_SECONDS = 0.05  # how often a relay looks whether a client far behind caught up

# (client sid, `terminal` event payload): False when that client is gone
Emit = Callable[[str, TerminalOutput], bool]
KeepingUp = Callable[[list[str]], bool]  # whether these clients may be sent more now


class UnknownTerminal(LookupError):
    """The conversation has no open terminal of that id."""


class TooManyTerminals(Exception):
    """As many terminals as allowed are open in the conversation."""


@dataclass
class _Relayed:
    terminal: SessionTerminal
    conversation_id: str
    clients: set[str] = field(default_factory=set)
    done: bool = False  # its relay came to the end
    stack: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)


class Terminals:
    """Every open terminal of this server, by conversation and id."""

    def __init__(
        self,
        pool: SessionPool,
        cwd: Path,
        emit: Emit,
        keeping_up: KeepingUp,
        start: Callable[..., Any],
    ) -> None:
        self.pool = pool
        self.cwd = cwd
        self.emit = emit
        self.keeping_up = keeping_up
        self.start = start
        self._lock = original("threading").Lock()  # clients and rings: taken briefly
        self._ended = new_condition()
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
        relayed = _Relayed(terminal, conversation_id, {sid})
        relayed.stack.enter_context(session.attached())
        with self._lock:
            self._open[(conversation_id, terminal.id)] = relayed
        self.start(self._relay, relayed)
        return terminal

    def find(self, conversation_id: str, terminal_id: str) -> SessionTerminal:
        """An open terminal of the conversation (UnknownTerminal if none is so named)."""
        return self._find(conversation_id, terminal_id).terminal

    def listed(self, conversation_id: str) -> list[SessionTerminal]:
        """The conversation's open terminals."""
        with self._lock:
            return [r.terminal for (cid, _), r in self._open.items() if cid == conversation_id]

    def attach(self, conversation_id: str, terminal_id: str, sid: str) -> Output:
        """Client `sid` follows the terminal from now on: its scrollback, after which the
        live events go on."""
        relayed = self._find(conversation_id, terminal_id)
        with self._lock:
            relayed.clients.add(sid)
            return relayed.terminal.scrollback()

    def close(self, conversation_id: str, terminal_id: str) -> None:
        """End the terminal's shell and all in its process session; forget it."""
        relayed = self._find(conversation_id, terminal_id)
        relayed.terminal.hang_up()
        wait_for(self._ended, lambda: relayed.done, END_SECONDS)

    def close_all(self) -> None:
        """End every terminal (the server stops)."""
        with self._lock:
            every = list(self._open.values())
        for relayed in every:
            with contextlib.suppress(Exception):
                relayed.terminal.hang_up()

    def _find(self, conversation_id: str, terminal_id: str) -> _Relayed:
        with self._lock:
            relayed = self._open.get((conversation_id, terminal_id))
        if relayed is None:
            raise UnknownTerminal(f"no open terminal {terminal_id[:32]} in this conversation")
        return relayed

    def _relay(self, relayed: _Relayed) -> None:
        """Send the attached clients each read of the terminal, until its end."""
        terminal = relayed.terminal
        try:
            while True:
                if not terminal.readable(LOOK_SECONDS):
                    if terminal.shell_exited:  # what it left running goes with it
                        terminal.hang_up()
                    continue
                with self._lock:
                    clients = list(relayed.clients)
                if not self.keeping_up(clients):
                    sleep(BEHIND_LOOK_SECONDS)
                    continue
                with self._lock:
                    out = terminal.read()
                    clients = list(relayed.clients)
                if out is None:
                    break
                if out.text:
                    self._send(relayed, clients, out)
        except Exception:
            log.exception("relaying a terminal failed")
            with contextlib.suppress(Exception):
                terminal.hang_up()
        self._end(relayed)

    def _send(
        self, relayed: _Relayed, clients: list[str], out: Output, *, ended: bool = False
    ) -> None:
        event = TerminalOutput(
            relayed.conversation_id, relayed.terminal.id, out.offset, out.text, ended
        )
        for sid in clients:
            if not self.emit(sid, event):
                with self._lock:
                    relayed.clients.discard(sid)

    def _end(self, relayed: _Relayed) -> None:
        """Its PTY has no one left on it: tell the clients, release it, forget it."""
        terminal = relayed.terminal
        end = terminal.ring.end
        with self._lock:
            clients = list(relayed.clients)
            self._open.pop((relayed.conversation_id, terminal.id), None)
        self._send(relayed, clients, Output("", end, end), ended=True)
        terminal.release()
        relayed.stack.close()
        with self._ended:
            relayed.done = True
            self._ended.notify_all()
