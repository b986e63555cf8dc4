"""The web part of the test kit: a real server process, a client over the network that records
what it receives (`EventClient`, on workspace_client's connection; `StockSocketIOClient` for the
tests of transports), and the app in-process with its test client (`Web`, `InProcessClient`)."""

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
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import engineio
import requests
import socketio
from flask import Flask
from flask.testing import FlaskClient
from flask_socketio import SocketIO, SocketIOTestClient

from tests.fake_llm import FakeLLM
from tests.kit import TEST_DEFAULTS, TOKEN, EventLog, Received, wait_until
from web.state import WebState
from workspace_client.connection import Connection

REPO = Path(__file__).resolve().parent.parent
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
    """The environment of a server or CLI process: no inherited AGENT_* settings, the kit's
    TEST_DEFAULTS, the fake model (as deepseek), then `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_")}
    env.update({f"AGENT_{name.upper()}": str(value) for name, value in TEST_DEFAULTS.items()})
    env.update(
        AGENT_PROVIDER="deepseek",
        AGENT_BASE_URL=base_url,
        AGENT_API_KEY=api_key,
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
        wrap: list[str] | None = None,
    ) -> None:
        self.workspace, self.data_dir, self.async_mode = workspace, data_dir, async_mode
        self.wrap = wrap or []  # a command that execs the server's argv that follows it
        self.env = agent_env(base_url, api_key, **(env or {}))
        self.port = 0
        self.lines: list[str] = []
        self._process: subprocess.Popen[str] | None = None
        self._stderr_path = data_dir.parent / f"server-{async_mode}-{id(self)}.stderr"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        """The running process's id (None when it is not running)."""
        return self._process.pid if self._process is not None else None

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

    def restart(self, timeout: float = 30, signum: int = signal.SIGINT) -> ServerProcess:
        """Stop (by `signum`; SIGKILL: a crash), then start again on the same port, as a person
        restarting it does: the tabs open on it reconnect to the new process."""
        self.stop(signum=signum)
        if not self._launch(timeout):
            self.stop()
            raise RuntimeError(f"server did not restart:\n{''.join(self.lines)}\n{self.stderr}")
        return self

    def _launch(self, timeout: float) -> bool:
        self.workspace.mkdir(parents=True, exist_ok=True)  # a --workspace must exist
        argv = self.wrap + agent_argv(
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
        return listening(self.port, timeout)

    def _pump(self, process: subprocess.Popen[str], seen: threading.Event) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            self.lines.append(line)
            match = URL_LINE.search(line)
            if match and int(match["port"]) == self.port:
                seen.set()
        seen.set()

    def stop(self, timeout: float = 10, signum: int = signal.SIGINT) -> int | None:
        """`signum` (SIGINT or SIGTERM), then wait; SIGKILL only if it does not end in time.
        Returns the exit code."""
        process, self._process = self._process, None
        if process is None:
            return None
        if process.poll() is None:
            process.send_signal(signum)
            try:
                return process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
                name = signal.Signals(signum).name
                raise AssertionError(f"server ignored {name} for {timeout}s") from None
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


@contextlib.contextmanager
def serving(
    root: Path,
    fake: FakeLLM,
    env: dict[str, str],
    files: Mapping[str, str | bytes],  # only read
    async_mode: str = "threading",
) -> Iterator[ServerProcess]:
    """`main.py web` on the fake model with `env`, on root/ws holding `files`, data in root/data."""
    workspace = root / "ws"
    workspace.mkdir()
    for name, content in files.items():
        (workspace / name).parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            (workspace / name).write_bytes(content)
        else:
            (workspace / name).write_text(content)
    with ServerProcess(
        workspace,
        root / "data",
        base_url=fake.base_url,
        api_key=fake.api_key,
        async_mode=async_mode,
        env=env,
    ) as process:
        yield process


def listening(port: int, timeout: float) -> bool:
    """True once something accepts connections on 127.0.0.1:`port` (False after `timeout`)."""

    def accepts() -> bool:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
            return True
        return False

    try:
        wait_until(accepts, timeout, f"a listener on port {port}", every=0.05)
    except AssertionError:
        return False
    return True


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
