"""Shared helpers for web tests: a real server process and a recording Socket.IO client."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import engineio
import requests
import socketio
from flask import Flask
from flask.testing import FlaskClient
from flask_socketio import SocketIO, SocketIOTestClient

from web.state import WebState

REPO = Path(__file__).resolve().parent.parent
TOKEN = "web-test-token-0123456789"
URL_LINE = re.compile(r"http://(?P<host>[^:/]+):(?P<port>\d+)/\?token=(?P<token>\S+)")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def agent_argv(front: str, workspace: Path, data_dir: Path, *extra: str) -> list[str]:
    """`python main.py FRONT` on these folders, then `extra`."""
    return [
        sys.executable,
        str(REPO / "main.py"),
        front,
        "--workspace",
        str(workspace),
        "--data-dir",
        str(data_dir),
        *extra,
    ]


def agent_env(base_url: str, api_key: str, **extra: str) -> dict[str, str]:
    """The environment of a server or CLI process: no inherited AGENT_* settings, the fake
    model, approval `auto`, mode `fast`, quick retries."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_")}
    env.update(
        AGENT_PROVIDER="deepseek",
        AGENT_BASE_URL=base_url,
        AGENT_API_KEY=api_key,
        AGENT_WEB_TOKEN=TOKEN,
        AGENT_APPROVAL="auto",
        AGENT_MODE="fast",
        AGENT_RETRY_BASE_DELAY="0.05",
        PYTHONUNBUFFERED="1",
    )
    env.update(extra)
    return env


class ServerProcess:
    """`python main.py web ...` as a subprocess; started by `start()`, ended by `stop()`."""

    def __init__(
        self,
        workspace: Path,
        data_dir: Path,
        *,
        base_url: str,
        api_key: str,
        async_mode: str = "threading",
        env: dict[str, str] | None = None,
    ) -> None:
        self.workspace, self.data_dir, self.async_mode = workspace, data_dir, async_mode
        self.env = agent_env(base_url, api_key, **(env or {}))
        self.port = 0
        self.lines: list[str] = []
        self._process: subprocess.Popen[str] | None = None
        self._stderr_path = data_dir.parent / f"server-{async_mode}-{id(self)}.stderr"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def stderr(self) -> str:
        with contextlib.suppress(OSError):
            return self._stderr_path.read_text(errors="replace")
        return ""

    def start(self, timeout: float = 30) -> ServerProcess:
        """Start on a free port and wait for the URL line (retrying if the port was taken)."""
        if self._process is not None:
            raise RuntimeError("the server is already running; stop() it first")
        for _ in range(3):
            self.port = free_port()
            if self._launch(timeout):
                return self
            self.stop()
        raise RuntimeError(f"server did not start:\n{''.join(self.lines)}\n{self.stderr}")

    def _launch(self, timeout: float) -> bool:
        argv = agent_argv(
            "web",
            self.workspace,
            self.data_dir,
            "--port",
            str(self.port),
            "--async-mode",
            self.async_mode,
        )
        self.lines = []
        stderr = self._stderr_path.open("w")
        self._process = subprocess.Popen(
            argv,
            cwd=REPO,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )
        stderr.close()
        seen = threading.Event()
        threading.Thread(target=self._pump, args=(self._process, seen), daemon=True).start()
        if not seen.wait(timeout) or self._process.poll() is not None:
            return False
        return _wait_listening(self.port, timeout)

    def _pump(self, process: subprocess.Popen[str], seen: threading.Event) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            self.lines.append(line)
            match = URL_LINE.search(line)
            if match and int(match["port"]) == self.port:
                seen.set()
        seen.set()

    def stop(self, timeout: float = 10) -> int | None:
        """SIGINT, then wait; SIGKILL only if it does not end in time. Returns the exit code."""
        process, self._process = self._process, None
        if process is None:
            return None
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                return process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
                raise AssertionError(f"server ignored SIGINT for {timeout}s") from None
        return process.returncode

    def __enter__(self) -> ServerProcess:
        return self if self._process is not None else self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def _wait_listening(port: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
            return True
        time.sleep(0.05)
    return False


class _InOrderEngineIO(engineio.Client):
    """Runs message handlers in the read loop, so they see messages in wire order.

    (The stock client starts a thread per message, which can reorder a fast stream.)
    """

    def _trigger_event(self, event: str, *args: Any, **kwargs: Any) -> Any:
        if event == "message":
            kwargs["run_async"] = False
        return super()._trigger_event(event, *args, **kwargs)


class InOrderClient(socketio.Client):
    """A `socketio.Client` whose event handlers run in arrival order."""

    def _engineio_client_class(self) -> type[engineio.Client]:
        return _InOrderEngineIO


@dataclass
class Received:
    name: str
    payload: dict[str, Any]
    at: float  # time.monotonic() on arrival


@dataclass
class EventClient:
    """A `socketio.Client` recording every event it receives, with waits over them."""

    url: str
    token: str | None = TOKEN
    transports: list[str] | None = None
    origin: str | None = None  # None: what the client libraries send by themselves
    batch_deltas: bool = False  # ask for gathered deltas, as the page does (web/batching.py)
    http_session: requests.Session | None = None  # what polling goes through (session_from)
    events: list[Received] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.headers = {"Origin": self.origin} if self.origin else {}
        options = {"suppress_origin": True} if self.origin else {}
        self.sio = InOrderClient(
            reconnection=False, websocket_extra_options=options, http_session=self.http_session
        )
        self._changed = threading.Condition()
        self.sio.on("*", self._record)

    def _record(self, name: str, payload: Any = None) -> None:
        with self._changed:
            self.events.append(Received(name, payload, time.monotonic()))
            self._changed.notify_all()

    def connect(self) -> EventClient:
        auth = {"token": self.token} if self.token is not None else None
        if auth is not None and self.batch_deltas:
            auth["batch_deltas"] = True
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
        deadline = time.monotonic() + 2
        while self.sio.connected and time.monotonic() < deadline:
            time.sleep(0.01)

    def call(self, event: str, payload: Any = None, timeout: float = 10) -> Any:
        """Send an event and return its acknowledgement."""
        return self.sio.call(event, {} if payload is None else payload, timeout=timeout)

    def wait_until(
        self,
        condition: Callable[[list[Received]], Any],
        timeout: float = 10,
        what: str = "condition",
    ) -> Any:
        """Block until `condition(events)` is truthy; return its value."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                result = condition(self.events)
                if result:
                    return result
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    names = [
                        (e.name, e.payload.get("seq"))
                        for e in self.events[-20:]
                        if isinstance(e.payload, dict)
                    ]
                    raise AssertionError(f"timed out waiting for {what}; last events {names}")
                self._changed.wait(remaining)

    def of(self, conversation_id: str) -> list[Received]:
        """The events of one conversation, in arrival order."""
        with self._changed:
            return [
                e
                for e in self.events
                if isinstance(e.payload, dict)
                and e.payload.get("conversation_id") == conversation_id
            ]

    def wait_done(self, conversation_id: str, timeout: float = 20) -> list[Received]:
        """Wait for the conversation's `done` event; return its events so far."""

        def finished(events: list[Received]) -> bool:
            return any(
                e.name == "done" and e.payload.get("conversation_id") == conversation_id
                for e in events
            )

        self.wait_until(finished, timeout, f"done of {conversation_id}")
        return self.of(conversation_id)

    def start(self, text: str, conversation_id: str | None = None, **extra: Any) -> str:
        """send_message; assert the ack is ok and return the conversation id."""
        ack = self.call("send_message", {"conversation_id": conversation_id, "text": text, **extra})
        assert ack["ok"], ack
        return str(ack["conversation_id"])


def assert_contiguous(events: list[Received]) -> None:
    """Seq grows by exactly 1 per event, starting wherever the list starts."""
    seqs = [e.payload["seq"] for e in events if "seq" in e.payload]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), seqs


@contextlib.contextmanager
def connected(url: str, **kwargs: Any) -> Iterator[EventClient]:
    """An EventClient connected for the block."""
    client = EventClient(url, **kwargs).connect()
    try:
        yield client
    finally:
        with contextlib.suppress(Exception):
            client.disconnect()


Event = tuple[str, dict[str, Any]]


class Recorder:
    """A Socket.IO test client that keeps every event it received."""

    def __init__(self, client: SocketIOTestClient) -> None:
        self.client = client
        self.events: list[Event] = []

    def call(self, event: str, *args: Any) -> Any:
        return self.client.emit(event, *args, callback=True)

    def poll(self) -> list[Event]:
        self.events += [
            (e["name"], e["args"][0] if e["args"] else None) for e in self.client.get_received()
        ]
        return self.events

    def wait_for(self, predicate: Callable[[Event], bool], timeout: float = 10) -> Event:
        deadline = time.monotonic() + timeout
        while True:
            found = next((e for e in self.poll() if predicate(e)), None)
            if found is not None:
                return found
            assert time.monotonic() < deadline, f"not received; got {[n for n, _ in self.events]}"
            time.sleep(0.01)

    def done(self, conversation_id: str, timeout: float = 10) -> list[dict[str, Any]]:
        """Wait for the conversation's `done`; return its event payloads with their names."""
        self.wait_for(
            lambda e: e[0] == "done" and e[1]["conversation_id"] == conversation_id, timeout
        )
        return [
            {"event": name, **payload}
            for name, payload in self.events
            if isinstance(payload, dict) and payload.get("conversation_id") == conversation_id
        ]

    def send(self, text: str, conversation_id: str | None = None, **extra: Any) -> str:
        """Start a task (forgetting the events received so far); return the conversation id."""
        self.poll()
        self.events.clear()
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

    def connect(self, token: str | None = TOKEN) -> Recorder:
        auth = {"token": token} if token is not None else None
        return Recorder(self.socketio.test_client(self.app, auth=auth))

    def http(self) -> FlaskClient:
        return self.app.test_client()
