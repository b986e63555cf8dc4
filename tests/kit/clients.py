"""Clients of a server: one over the network that records what it receives (`EventClient`,
on workspace_client's connection; `StockSocketIOClient` for the tests of transports), and the
app in-process with its test client (`Web`, `InProcessClient`).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import engineio
import requests
import socketio
from flask import Flask
from flask.testing import FlaskClient
from flask_socketio import SocketIO, SocketIOTestClient

from tests.kit.events import EventLog, Received
from tests.kit.settings import TOKEN
from tests.kit.waits import wait_until
from web.state import WebState
from workspace_client.connection import Connection


class EventClient(EventLog):
    """A connection to a running server (workspace_client's `Connection`, over a WebSocket)
    recording every event it receives, in wire order, with its arrival time."""

    def __init__(
        self,
        url: str,
        token: str | None = TOKEN,
        *,
        origin: str | None = None,  # an Origin header; None: none, as a program sends
        batch_deltas: bool = False,  # ask for gathered deltas, as the page does (DeltaBatcher)
    ) -> None:
        super().__init__()
        self.url, self.token, self.origin, self.batch_deltas = url, token, origin, batch_deltas
        self._handlers: dict[str, Callable[[Any], None]] = {}
        self._connection: Connection | None = None

    @property
    def connected(self) -> bool:
        return self._connection is not None and self._connection.connected

    def on(self, event: str, handler: Callable[[Any], None]) -> None:
        """Hand `event`'s payloads to `handler` (on the reader thread) instead of recording them."""
        self._handlers[event] = handler

    def connect(self) -> EventClient:
        """Raises ConnectionRefused (`code`: `wrong_token`, ...) or simple_websocket's
        ConnectionError (the handshake refused: a foreign Origin)."""
        auth: dict[str, Any] | None = {"token": self.token} if self.token is not None else None
        if auth is not None and self.batch_deltas:
            auth["batch_deltas"] = True
        self._connection = Connection(
            self.url,
            auth=auth,
            on_event=self._on_event,
            headers={"Origin": self.origin} if self.origin else None,
        )
        return self

    def _on_event(self, event: str, payload: Any) -> None:
        handler = self._handlers.get(event)
        if handler is not None:
            handler(payload)
        else:
            self.record(event, payload)

    def disconnect(self) -> None:
        """Leave: when it returns, the server has been told and the reader has ended."""
        if self._connection is not None:
            self._connection.close()

    def call(self, event: str, payload: Any = None, timeout: float = 10) -> Any:
        """Send an event and return its acknowledgement."""
        return self._live().call(event, {} if payload is None else payload, timeout)

    def emit(
        self, event: str, payload: Any = None, callback: Callable[[Any], None] | None = None
    ) -> None:
        """Send an event without waiting; `callback(ack)` on the reader thread."""
        self._live().emit(event, {} if payload is None else payload, callback)

    def start(self, text: str, conversation_id: str | None = None, **extra: Any) -> str:
        """send_message; assert the ack is ok and return the conversation id."""
        ack = self.call("send_message", {"conversation_id": conversation_id, "text": text, **extra})
        assert ack["ok"], ack
        return str(ack["conversation_id"])

    def _live(self) -> Connection:
        if self._connection is None:
            raise RuntimeError("connect() first")
        return self._connection


class _InOrderEngineIO(engineio.Client):
    """Runs message handlers in the read loop, so they see messages in wire order.

    (The stock client starts a thread per message, which can reorder a fast stream.)
    """

    def _trigger_event(self, event: str, *args: Any, **kwargs: Any) -> Any:
        if event == "message":
            kwargs["run_async"] = False
        return super()._trigger_event(event, *args, **kwargs)


class _InOrderSocketIO(socketio.Client):
    """A `socketio.Client` whose event handlers run in arrival order."""

    def _engineio_client_class(self) -> type[engineio.Client]:
        return _InOrderEngineIO


@dataclass
class StockSocketIOClient(EventLog):
    """python-socketio's own client, recording what it receives: for the tests of transports
    (long-polling and its upgrade, a balancer's sticky cookie, the Origin a browser-like client
    sends); every other test uses `EventClient`."""

    url: str
    token: str | None = TOKEN
    transports: list[str] | None = None
    origin: str | None = None  # None: what the client libraries send by themselves
    http_session: requests.Session | None = None  # what polling goes through (session_from)

    def __post_init__(self) -> None:
        super().__init__()
        self.headers = {"Origin": self.origin} if self.origin else {}
        options = {"suppress_origin": True} if self.origin else {}
        self.sio = _InOrderSocketIO(
            reconnection=False, websocket_extra_options=options, http_session=self.http_session
        )
        self.sio.on("*", self.record)

    def connect(self) -> StockSocketIOClient:
        auth = {"token": self.token} if self.token is not None else None
        self.sio.connect(
            self.url, auth=auth, headers=self.headers, transports=self.transports, wait_timeout=10
        )
        return self

    def disconnect(self) -> None:
        """Leave now: the server sees it at once, the client library finishes in the background.

        (websocket-client waits up to 3 s for a close frame the threading server may already
        have sent and the read loop consumed.)
        """
        if not self.sio.connected:
            return
        threading.Thread(target=self.sio.disconnect, daemon=True).start()
        with contextlib.suppress(AssertionError):
            wait_until(lambda: not self.sio.connected, 2, "the client to leave", every=0.01)

    def call(self, event: str, payload: Any = None, timeout: float = 10) -> Any:
        return self.sio.call(event, {} if payload is None else payload, timeout=timeout)

    def start(self, text: str, conversation_id: str | None = None) -> str:
        ack = self.call("send_message", {"conversation_id": conversation_id, "text": text})
        assert ack["ok"], ack
        return str(ack["conversation_id"])


def assert_contiguous(events: list[Received]) -> None:
    """Seq grows by exactly 1 per event, starting wherever the list starts."""
    seqs = [e.payload["seq"] for e in events if "seq" in e.payload]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), seqs


def ack_latency(client: EventClient | StockSocketIOClient, event: str = "get_status") -> float:
    """Seconds the server takes to ack one `event` (a measure of its responsiveness)."""
    started = time.monotonic()
    assert client.call(event, {})["ok"]
    return time.monotonic() - started


@contextlib.contextmanager
def connected(url: str, **kwargs: Any) -> Iterator[EventClient]:
    """An EventClient connected for the block."""
    client = EventClient(url, **kwargs).connect()
    try:
        yield client
    finally:
        with contextlib.suppress(Exception):
            client.disconnect()


class InProcessClient(EventLog):
    """Flask-SocketIO's test client (in-process, no network), recording every event it was
    sent; it fetches them on every read and wait."""

    def __init__(self, client: SocketIOTestClient) -> None:
        super().__init__()
        self.client = client

    def fetch(self) -> None:
        for event in self.client.get_received():
            self.record(event["name"], event["args"][0] if event["args"] else None)

    def call(self, event: str, *args: Any) -> Any:
        """Send an event and return its acknowledgement."""
        return self.client.emit(event, *args, callback=True)

    def send(self, text: str, conversation_id: str | None = None, **extra: Any) -> str:
        """Start a task (forgetting the events received so far); return the conversation id."""
        self.clear()
        ack = self.call("send_message", {"conversation_id": conversation_id, "text": text, **extra})
        assert ack["ok"], ack
        return str(ack["conversation_id"])


class Web:
    """One app built on temporary folders, with helpers to connect to it."""

    def __init__(self, app: Flask) -> None:
        self.app = app
        self.socketio: SocketIO = app.extensions["socketio"]
        self.state: WebState = app.extensions["agent"]
        self.workspace = self.state.services.workspace.root
        self.data_dir = self.state.settings.data_dir

    def connect(self, token: str | None = TOKEN) -> InProcessClient:
        auth = {"token": token} if token is not None else None
        return InProcessClient(self.socketio.test_client(self.app, auth=auth))

    def http(self) -> FlaskClient:
        return self.app.test_client()
