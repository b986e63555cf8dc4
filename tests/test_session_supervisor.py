"""The session supervisor over its control socket: the protocol, what it refuses, and what a
command inside the sandbox can and cannot reach of it. Real bubblewrap (skipped where it cannot
make a sandbox), real processes, raw SOCK_SEQPACKET messages."""

from __future__ import annotations

import errno
import json
import os
import shlex
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from modules.sandbox.confinement import detect_confinement
from modules.sandbox.resource_limits import ResourceLimits
from modules.sandbox.session.launcher import SUPERVISOR, Launched, LocalLauncher
from tests.kit.waits import wait_until
from utils.settings import Settings

PY = os.path.realpath(sys.executable)
SO_SNDBUFFORCE = 32  # Linux: a send buffer past wmem_max, for root
PIDFD_GETFD = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
pidfd = os.pidfd_open(1)
print("getfd", libc.syscall(438, pidfd, 3, 0), ctypes.get_errno())  # pidfd_getfd(2)
"""


class Raw:
    """The server's end of a supervisor's control socket, used by hand."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.sock.settimeout(10)
        self.events: list[dict[str, Any]] = []
        self.next_id = 100

    def send(self, data: bytes, fds: list[int] | None = None) -> None:
        if fds:
            socket.send_fds(self.sock, [data], fds)
        else:
            self.sock.send(data)

    def answer(self) -> tuple[dict[str, Any], list[int]]:
        """The next answer (exit notices on the way are kept in `events`)."""
        while True:
            data, fds, _, _ = socket.recv_fds(self.sock, 1 << 18, 4)
            assert data, "the supervisor closed its socket"
            message = json.loads(data)
            if "event" in message:
                self.events.append(message)
                continue
            return message, fds

    def ask(self, op: str, **fields: Any) -> tuple[dict[str, Any], list[int]]:
        self.next_id += 1
        self.send(json.dumps({"op": op, "id": self.next_id, **fields}).encode())
        answer, fds = self.answer()
        assert answer["id"] == self.next_id
        return answer, fds

    def run(self, command: str, timeout: float = 20) -> str:
        """Run `bash -c command` inside and return its output, once it exited."""
        answer, fds = self.ask("spawn", argv=["bash", "-c", command], cwd="/tmp",
                               env={"PATH": "/usr/bin:/bin"}, stdin=False)  # fmt: skip
        assert answer["ok"], answer
        (out,) = fds
        chunks = []
        deadline = time.monotonic() + timeout
        with os.fdopen(out, "rb") as reader:
            while chunk := reader.read1(65536):
                chunks.append(chunk)
                assert time.monotonic() < deadline
        return b"".join(chunks).decode(errors="replace")


def settings_in(tmp_path: Path) -> Settings:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    return Settings(workspace=ws, data_dir=tmp_path / "data", sandbox="local")


@pytest.fixture
def bwrapped(tmp_path: Path) -> Iterator[tuple[Raw, Launched]]:
    """A supervisor started as a session's sandbox is (bubblewrap), spoken to by hand."""
    settings = settings_in(tmp_path)
    confinement = detect_confinement(settings.local_sandbox, settings.workspace)
    if confinement.kind != "bubblewrap":
        pytest.skip("bubblewrap is not installed or cannot create a sandbox here")
    launcher = LocalLauncher(settings, confinement, ResourceLimits(settings.local_sandbox))
    launched = launcher.launch(tmp_path / "sandbox.log")
    raw = Raw(launched.control)
    try:
        yield raw, launched
    finally:
        launched.control.close()
        launched.stop()


def test_it_answers_as_pid_1_of_its_own_namespace(bwrapped: tuple[Raw, Launched]) -> None:
    raw, _ = bwrapped
    answer, fds = raw.ask("ping")
    assert answer == {"id": raw.next_id, "ok": True, "pid": 1, "pid1": True} and not fds


def test_a_spawned_command_streams_through_the_fd_it_hands_over(
    bwrapped: tuple[Raw, Launched],
) -> None:
    raw, _ = bwrapped
    assert raw.run("echo out; echo err >&2; echo $$").splitlines()[:2] == ["out", "err"]
    wait_until(lambda: raw.ask("ping") and raw.events, 5, "the exit notice")
    notice = raw.events[0]
    assert notice["event"] == "exit" and notice["code"] == 0 and notice["sid"] == notice["pid"]
    assert notice["sid_empty"] is True


@pytest.mark.parametrize(
    "message",
    [
        b"not json",
        b"[1, 2]",
        b'{"op": "ping"}',
        b'{"op": "ping", "id": "7"}',
        b'{"op": "nope", "id": 7}',
        b'{"op": "spawn", "id": 7, "argv": [], "cwd": "/"}',
        b'{"op": "spawn", "id": 7, "argv": ["true"], "cwd": "relative"}',
        b'{"op": "spawn", "id": 7, "argv": ["true"], "cwd": "/", "env": {"A": 1}}',
        b'{"op": "spawn", "id": 7, "argv": ["true"], "cwd": "/", "rlimits": {"RLIMIT_X": [1, 1]}}',
        b'{"op": "spawn", "id": 7, "argv": ["/no/such/program"], "cwd": "/"}',
        b'{"op": "spawn", "id": 7, "argv": ["true"], "cwd": "/", "pty": {"rows": 0}}',
        b'{"op": "signal", "id": 7, "pid": 1, "sig": "KILL"}',
        b'{"op": "signal", "id": 7, "pid": 5, "sig": "SEGV"}',
        b'{"op": "signal", "id": 7, "pid": 5, "sig": "KILL", "scope": "everyone"}',
        b'{"op": "connect", "id": 7, "port": 8000, "host": "10.0.0.1"}',
        b'{"op": "connect", "id": 7, "port": 70000}',
        b'{"op": "connect", "id": 7, "port": 1}',
        b"x" * (300 * 1024),
    ],
)
def test_a_bad_request_gets_an_error_and_the_supervisor_goes_on(
    bwrapped: tuple[Raw, Launched], message: bytes
) -> None:
    raw, _ = bwrapped
    if len(message) > 200_000:  # past a socket's default send buffer: only root can send it
        if os.geteuid() != 0:
            pytest.skip("only root may send a message past the default send buffer")
        raw.sock.setsockopt(socket.SOL_SOCKET, SO_SNDBUFFORCE, 1 << 20)
    raw.send(message)
    answer, fds = raw.answer()
    assert answer["ok"] is False and answer["error"] and not fds, answer
    assert raw.ask("ping")[0]["ok"]


def test_descriptors_sent_to_it_are_closed_not_used(bwrapped: tuple[Raw, Launched]) -> None:
    raw, _ = bwrapped
    read, write = os.pipe()
    raw.next_id += 1
    raw.send(json.dumps({"op": "ping", "id": raw.next_id}).encode(), [write])
    os.close(write)
    assert raw.answer()[0]["ok"]
    assert os.read(read, 10) == b""  # no copy of the writing end stayed open inside
    os.close(read)


def test_a_command_cannot_reach_the_control_socket_or_signal_the_supervisor(
    bwrapped: tuple[Raw, Launched],
) -> None:
    raw, _ = bwrapped
    probe = (
        "readlink /proc/1/fd/3 || echo NO-LINK; "
        "cat /proc/1/environ >/dev/null 2>&1 && echo ENVIRON-READ; "
        "for n in 0 1 2 3 4 5 6 7; do exec 9<>/proc/1/fd/$n 2>/dev/null && echo OPENED-$n; done; "
        f"python3 -c {shlex.quote(PIDFD_GETFD)}; "
        "kill -TERM 1; kill -INT 1; kill -KILL 1; kill -HUP 1; echo signalled"
    )
    output = raw.run(probe)
    assert "NO-LINK" in output and "ENVIRON-READ" not in output and "OPENED" not in output, output
    assert f"getfd -1 {errno.EPERM}" in output, output  # another process's descriptor: refused
    assert "signalled" in output
    assert raw.ask("ping")[0]["ok"]  # every signal from inside the namespace is ignored


def test_ports_and_connect_reach_the_sessions_own_loopback(
    bwrapped: tuple[Raw, Launched],
) -> None:
    raw, _ = bwrapped
    port = _free_port()
    answer, fds = raw.ask("spawn", argv=[PY, "-m", "http.server", str(port), "-b", "127.0.0.1"],
                          cwd="/tmp", env={}, stdin=False)  # fmt: skip
    assert answer["ok"], answer
    output = os.fdopen(fds[0], "rb")  # kept open: the server logs each request to it
    ports = wait_until(lambda: raw.ask("ports")[0]["ports"], 10, "the server listening")
    assert ports == [
        {"port": port, "host": "127.0.0.1", "pid": answer["pid"], "sid": answer["pid"]}
    ]
    answer, fds = raw.ask("connect", port=port)
    with socket.socket(fileno=fds[0]) as conn:
        conn.sendall(b"GET / HTTP/1.0\r\n\r\n")
        assert conn.recv(100).startswith(b"HTTP/1.0 200")
    assert b"GET / HTTP/1.0" in output.read1(4096)
    output.close()
    with pytest.raises(OSError):  # the host's loopback is another one
        socket.create_connection(("127.0.0.1", port), timeout=1).close()


def test_procs_lists_the_sessions_processes(bwrapped: tuple[Raw, Launched]) -> None:
    raw, _ = bwrapped
    answer, fds = raw.ask("spawn", argv=["sleep", "30"], cwd="/", env={}, stdin=True)
    assert answer["ok"] and len(fds) == 2
    for fd in fds:
        os.close(fd)
    listed = raw.ask("procs")[0]["procs"]
    assert [(p["pid"], p["sid"], p["argv"]) for p in listed] == [
        (answer["pid"], answer["pid"], ["sleep", "30"])
    ]
    assert raw.ask("signal", pid=answer["pid"], sig="KILL", scope="session")[0]["signalled"] == 1
    wait_until(lambda: raw.ask("ping") and raw.events, 5, "its exit notice")
    assert raw.events[0]["signal"] == 9 and raw.events[0]["sid_empty"]


def test_a_pty_is_the_controlling_terminal_of_what_runs_on_it(
    bwrapped: tuple[Raw, Launched],
) -> None:
    raw, _ = bwrapped
    answer, fds = raw.ask("spawn", argv=["bash", "-c", "tty; stty size"], cwd="/", env={},
                          pty={"rows": 30, "cols": 90})  # fmt: skip
    assert answer["ok"], answer
    output = b""
    with os.fdopen(fds[0], "rb", buffering=0) as master:
        try:
            while chunk := master.read(1024):
                output += chunk
        except OSError:  # EIO once the terminal's last user closed it
            pass
    assert output.decode().split() == ["/dev/pts/0", "30", "90"], output


def test_the_sandbox_ends_with_its_control_socket(bwrapped: tuple[Raw, Launched]) -> None:
    raw, launched = bwrapped
    marker = f"sleep 7{time.time_ns() % 10**6}"
    raw.run(f"setsid {marker} >/dev/null 2>&1 & {marker} >/dev/null 2>&1 &")
    wait_until(lambda: _running(marker) == 2, 5, "both")
    launched.control.close()
    wait_until(lambda: launched.process.poll() is not None, 10, "the sandbox's end")
    wait_until(lambda: not any(marker in line for line in _command_lines()), 5, "no process left")


def test_listening_once_leaves_no_way_in(tmp_path: Path) -> None:
    """Docker's way in: the supervisor accepts one connection on a path, then removes it."""
    path = tmp_path / "control.sock"
    child = subprocess.Popen([PY, "-I", "-S", str(SUPERVISOR), "--listen", str(path)])
    try:
        wait_until(path.exists, 10, "the listening socket")
        assert path.stat().st_mode & 0o777 == 0o600
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        sock.connect(str(path))
        raw = Raw(sock)
        assert raw.ask("ping")[0]["ok"]
        assert not path.exists()
        sock.close()
        assert child.wait(timeout=10) == 0
    finally:
        child.kill()
        child.wait()


def test_without_a_namespace_it_kills_what_it_started_when_the_server_goes(
    tmp_path: Path,
) -> None:
    """The plain way (not as root, no bubblewrap): a child with PR_SET_CHILD_SUBREAPER that
    kills every descendant, daemons included, at the end of its socket."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    child = subprocess.Popen([PY, "-I", "-S", str(SUPERVISOR), str(theirs.fileno())],
                             pass_fds=[theirs.fileno()], start_new_session=True)  # fmt: skip
    theirs.close()
    raw = Raw(ours)
    marker = f"sleep 8{time.time_ns() % 10**6}"
    try:
        assert raw.ask("ping")[0]["pid1"] is False
        raw.run(f"setsid {marker} >/dev/null 2>&1 & {marker} >/dev/null 2>&1 &")
        wait_until(lambda: _running(marker) == 2, 5, "both")
        ours.close()
        assert child.wait(timeout=10) == 0
        wait_until(lambda: not any(marker in line for line in _command_lines()), 5, "none left")
    finally:
        child.kill()
        child.wait()


def _free_port() -> int:
    """A port nothing on the host listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _running(marker: str) -> int:
    """How many live processes run the command line `marker` (not a shell naming it)."""
    return sum(line.startswith(marker) for line in _command_lines())


def _command_lines() -> list[str]:
    lines = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                lines.append((entry / "cmdline").read_bytes().replace(b"\0", b" ").decode())
            except OSError:
                continue
    return lines
