"""The terminal ops' payloads (docs/protocol.md §4.1 terminal_*): a person's terminal in the
conversation's sandbox session, as the server validates them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import Field

from protocol.requests import ConversationRef

MAX_INPUT_CHARS = 16 * 1024  # of one terminal_input frame (a paste is sent in several)
Rows = Annotated[int, Field(ge=2, le=500)]
Cols = Annotated[int, Field(ge=10, le=1000)]
TerminalId = Annotated[str, Field(min_length=1, max_length=32)]


class TerminalOpen(ConversationRef):
    """A new terminal of `rows` x `cols` characters."""

    rows: Rows = 24
    cols: Cols = 80


class TerminalRef(ConversationRef):
    """One of the conversation's open terminals (terminal_attach, terminal_close)."""

    terminal_id: TerminalId


class TerminalInput(TerminalRef):
    """Keys typed (or pasted) into it, as the terminal encodes them."""

    data: str = Field(min_length=1, max_length=MAX_INPUT_CHARS)


class TerminalResize(TerminalRef):
    rows: Rows
    cols: Cols


@dataclass(frozen=True)
class TerminalOutput:
    """A terminal's output (§4.2 `terminal`), sent only to the clients attached to it: `data`
    (whole UTF-8 characters) begins at byte `offset` of its output; `ended` comes once, last."""

    conversation_id: str
    terminal_id: str
    offset: int
    data: str
    ended: bool = False

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {
            "conversation_id": self.conversation_id,
            "terminal_id": self.terminal_id,
            "offset": self.offset,
            "data": self.data,
        }
        if self.ended:
            wire["ended"] = True
        return wire
