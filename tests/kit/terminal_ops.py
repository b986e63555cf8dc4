"""A person's terminal driven through the server's terminal ops by a Socket.IO client: open
one, type into it, and wait until its screen shows something."""

from __future__ import annotations

from tests.kit.clients import EventClient
from tests.kit.waits import wait_until

WAIT = 30


def open_terminal(client: EventClient, cid: str, rows: int = 24, cols: int = 80) -> str:
    """A new terminal in the conversation; its id."""
    ack = client.call("terminal_open", {"conversation_id": cid, "rows": rows, "cols": cols})
    assert ack["ok"], ack
    return str(ack["terminal_id"])


def screen(client: EventClient, cid: str, tid: str) -> str:
    """Everything the client received of the terminal, in order."""
    events = client.named("terminal", conversation_id=cid, terminal_id=tid)
    return "".join(e["data"] for e in events)


def type_in(client: EventClient, cid: str, tid: str, text: str) -> None:
    """Type `text` into the terminal, all of it taken."""
    ack = client.call("terminal_input", {"conversation_id": cid, "terminal_id": tid, "data": text})
    assert ack["ok"] and ack["written"] == len(text.encode()), ack


def shows(client: EventClient, cid: str, tid: str, text: str) -> None:
    """Wait until the terminal's screen shows `text`."""
    wait_until(lambda: text in screen(client, cid, tid), WAIT, f"{text!r} on the terminal",
               details=lambda: repr(screen(client, cid, tid)[-400:]))  # fmt: skip
