"""A real server process on the fake model (`ServerProcess`, `serving`), its command line and
environment, and the ports it listens on.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol

import requests
from requests.adapters import HTTPAdapter

from tests.fake_llm import FakeLLM
from tests.kit.settings import TEST_DEFAULTS
from tests.kit.waits import SLOWNESS, wait_until


def session_from(address: str) -> requests.Session:
    """A requests session whose connections leave from `address`, one of 127.0.0.0/8: the
    server sees that client address, so an address a test gets throttled is its own."""
    adapter = HTTPAdapter()
    adapter.poolmanager.connection_pool_kw["source_address"] = (address, 0)
    session = requests.Session()
    session.mount("http://", adapter)
    return session


REPO = Path(__file__).resolve().parent.parent.parent


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


def without_settings(server: ServerProcess, *names: str) -> ServerProcess:
    """The server, to be started without these settings (`api_key`, `mode`) in its
    environment: what it then has of them comes from its settings file or the default."""
    for name in names:
        server.env.pop(f"AGENT_{name.upper()}", None)
    return server


class ModelEndpoint(Protocol):
    """Where a server finds its model (a fake one: tests.fake_llm, bench/pace_fake.py)."""

    @property
    def base_url(self) -> str: ...

    api_key: str


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

    @classmethod
    def in_folder(cls, root: Path, model: ModelEndpoint, **options: Any) -> ServerProcess:
        """A server on `model` whose workspace is root/ws and data folder root/data."""
        return cls(
            root / "ws", root / "data", base_url=model.base_url, api_key=model.api_key, **options
        )

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
        process = self._process
        if not seen.wait(timeout) or process.poll() is not None:
            return False
        # the URL line comes before the bind: a port taken meanwhile ends the process
        return listening(self.port, timeout, alive=lambda: process.poll() is None)

    def _pump(self, process: subprocess.Popen[str], seen: threading.Event) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            self.lines.append(line)
            match = URL_LINE.search(line)
            if match and int(match["port"]) == self.port:
                seen.set()
        seen.set()

    def exited(self, timeout: float = 10) -> int:
        """The exit code of a server that was told to stop some other way, once it ended."""
        process, self._process = self._process, None
        assert process is not None, "the server is not running"
        return process.wait(timeout * SLOWNESS)

    def stop(self, timeout: float = 10, signum: int = signal.SIGINT) -> int | None:
        """`signum` (SIGINT or SIGTERM), then wait (`timeout` × TEST_SLOWNESS); SIGKILL only if
        it does not end in time. Returns the exit code."""
        process, self._process = self._process, None
        if process is None:
            return None
        if process.poll() is None:
            process.send_signal(signum)
            try:
                return process.wait(timeout * SLOWNESS)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
                name = signal.Signals(signum).name
                raise AssertionError(f"server ignored {name} for {timeout * SLOWNESS}s") from None
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
    with ServerProcess.in_folder(root, fake, async_mode=async_mode, env=env) as process:
        yield process


def listening(port: int, timeout: float, alive: Callable[[], bool] | None = None) -> bool:
    """True once something accepts connections on 127.0.0.1:`port`; False after `timeout`, or
    as soon as `alive()` says the process that was to listen there has ended."""

    def accepts() -> bool:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
            return True
        return False

    def settled() -> str | None:
        if alive is not None and not alive():
            return "ended"
        return "listening" if accepts() else None

    try:
        return wait_until(settled, timeout, f"a listener on port {port}", every=0.05) == "listening"
    except AssertionError:
        return False
