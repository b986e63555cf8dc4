"""What `cli --server` says of its connection to the server, as it happens: lost
(reconnecting…), back, and its end when the server refuses it (a restart gave it another
token) or does not come back. An end is said at once, wherever the terminal is (at the prompt
or following a task), and the session ends with exit 2."""

from __future__ import annotations

import signal
import threading
from types import FrameType
from typing import TextIO

from workspace_client import ConnectionRefused
from workspace_client.client import LinkState

TOKEN_HELP = (
    "give the one in the URL the web server printed at its start (…/?token=…), or in its "
    "DATA_DIR/web_token"
)
END_SIGNAL = signal.SIGUSR1  # sent to the main thread to end what it waits on


class LinkEnded(Exception):
    """The connection ended for good; the message says why and what to do."""


class LinkWatch:
    """The client's `on_link`; from the client's reconnecting thread, it writes what happened
    and, at an end, interrupts the main thread with LinkEnded. Made in the main thread."""

    def __init__(self, url: str, err: TextIO) -> None:
        self.url, self.err = url, err
        self.ended = ""
        self._main = threading.get_ident()
        signal.signal(END_SIGNAL, self._end)

    def __call__(self, state: LinkState, error: Exception | None) -> None:
        if state == "lost":
            self._say(f"the connection to {self.url} was lost: reconnecting…")
        elif state == "back":
            self._say(f"reconnected to {self.url}")
        else:
            self.ended = self.why(error)
            signal.pthread_kill(self._main, END_SIGNAL)

    def why(self, error: BaseException | None) -> str:
        """What to tell the person of a connection that ended for good."""
        if isinstance(error, ConnectionRefused) and error.code == "wrong_token":
            return (
                f"{self.url} refused the token: the server has another one (it was restarted "
                f"with a new token?); {TOKEN_HELP}"
            )
        if isinstance(error, ConnectionRefused):
            return f"{self.url} refused the connection: {error}"
        return f"{self.url} did not come back: {error}; is `main.py web` running there?"

    def _say(self, text: str) -> None:
        self.err.write(f"\n{text}\n")
        self.err.flush()

    def _end(self, signum: int, frame: FrameType | None) -> None:
        raise LinkEnded(self.ended)
