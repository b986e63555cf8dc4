"""A scaled-out server for tests and benchmarks: a throwaway redis-server, several
`main.py web` processes sharing one data dir through it, and haproxy in front."""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

import pytest

from tests.fake_llm import FakeLLM
from tests.kit.clients import EventClient, connected
from tests.kit.model import calls_in_the_message
from tests.kit.server import REPO, ServerProcess, free_port, listening

T = TypeVar("T")
HAPROXY_CFG = REPO / "deploy" / "haproxy.cfg"


def missing_programs() -> str | None:
    """Why the scale-out tests cannot run here, or None."""
    absent = [name for name in ("redis-server", "haproxy") if shutil.which(name) is None]
    if absent:
        return (
            f"{' and '.join(absent)} not installed (make test installs Debian's "
            "redis-server and haproxy)"
        )
    return None


class RedisServer:
    """`redis-server` on a free loopback port, without persistence; restartable in place."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.port = free_port()
        self._process: subprocess.Popen[bytes] | None = None

    def url(self, db: int = 0) -> str:
        """A database of its own per cluster: processes of one cluster share a data dir."""
        return f"redis://127.0.0.1:{self.port}/{db}"

    def start(self) -> RedisServer:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._process = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.workdir),
            ],
            stdout=(self.workdir / "redis.log").open("ab"),
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        if not listening(self.port, 10):
            self.stop()
            raise RuntimeError(f"redis-server did not listen on {self.port}")
        return self

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


class ClusterServer(ServerProcess):
    """A web process of the cluster; `kill()` ends it like a crash (SIGKILL)."""

    def kill(self) -> None:
        process, self._process = self._process, None
        if process is not None:
            process.send_signal(signal.SIGKILL)
            process.wait()


def haproxy_config(backends: list[int], port: int) -> str:
    """deploy/haproxy.cfg with its frontend on `port` and its servers on these loopback ports."""
    text = HAPROXY_CFG.read_text()
    text = re.sub(r"(?m)^(\s*bind ).*$", rf"\g<1>127.0.0.1:{port}", text, count=1)
    template = re.search(r"(?m)^\s*server agent1 .*$", text)
    assert template is not None, "deploy/haproxy.cfg has no `server agent1` line"
    text = re.sub(r"(?m)^\s*server agent\d+ .*\n?", "", text)
    lines = "".join(
        template[0]
        .replace("agent1 agent1:5000", f"agent{n} 127.0.0.1:{backend}")
        .replace("cookie agent1", f"cookie agent{n}")
        + "\n"
        for n, backend in enumerate(backends, start=1)
    )
    return text.rstrip("\n") + "\n" + lines


class Haproxy:
    """haproxy with deploy/haproxy.cfg's settings in front of `backends` (loopback ports)."""

    def __init__(self, workdir: Path, backends: list[int]) -> None:
        self.port = free_port()
        self.config = workdir / "haproxy.cfg"
        workdir.mkdir(parents=True, exist_ok=True)
        self.config.write_text(haproxy_config(backends, self.port))
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> Haproxy:
        self._process = subprocess.Popen(
            ["haproxy", "-db", "-f", str(self.config)],
            stdout=(self.config.parent / "haproxy.log").open("ab"),
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        if not listening(self.port, 10):
            self.__exit__(None, None, None)
            raise RuntimeError(f"haproxy did not listen; see {self.config.parent}/haproxy.log")
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.terminate()
            process.wait(10)


@contextlib.contextmanager
def cluster(
    root: Path,
    redis_url: str,
    *,
    base_url: str,
    api_key: str,
    processes: int = 2,
    async_mode: str = "threading",
    env: dict[str, str] | None = None,
) -> Iterator[list[ClusterServer]]:
    """`processes` web servers sharing root/ws and root/data through `redis_url` (with `env`
    besides)."""
    servers = [
        ClusterServer(
            root / "ws",
            root / "data",
            base_url=base_url,
            api_key=api_key,
            async_mode=async_mode,
            env={**(env or {}), "AGENT_REDIS_URL": redis_url},
        )
        for _ in range(processes)
    ]
    try:
        for server in servers:
            server.start()
        yield servers
    finally:
        for server in servers:
            with contextlib.suppress(Exception):
                server.stop()


SESSION_OP_SECONDS = 60  # a relayed session op, on a loaded machine


@contextlib.contextmanager
def session_cluster(root: Path, redis_url: str, fake: FakeLLM) -> Iterator[list[ClusterServer]]:
    """Two servers with sandbox sessions (the local sandbox under bubblewrap) whose tasks run
    the calls their message spells (tests.kit.model.calls_in_the_message); the test is skipped
    where bubblewrap cannot run them."""
    fake.responder = calls_in_the_message
    env = {"AGENT_SANDBOX": "local", "AGENT_PROCESS_SETTLE_SECONDS": "0.5"}
    with cluster(root, redis_url, base_url=fake.base_url, api_key=fake.api_key, env=env) as pair:
        with connected(pair[0].url) as client:
            kind = client.call("get_status")["sandbox"]["kind"]
        if kind != "bubblewrap":
            pytest.skip("bubblewrap is not usable here")
        yield pair


def process_owner_pid(server: ClusterServer, cid: str, process_id: str) -> int:
    """The pid of the server process whose session started the process (its record's owner)."""
    index = server.data_dir / "processes" / cid / "index.json"
    records = {r["id"]: r for r in json.loads(index.read_text())["processes"]}
    return int(records[process_id]["owner"].split(":")[1])


def session_op(client: EventClient, name: str, cid: str, **fields: Any) -> dict[str, Any]:
    """A process or terminal op on the conversation, which must answer ok."""
    ack = client.call(name, {"conversation_id": cid, **fields}, timeout=SESSION_OP_SECONDS)
    assert ack["ok"], (name, ack)
    return dict(ack)
