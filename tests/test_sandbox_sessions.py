"""A conversation's sandbox session, in this process: the commands of the tools in it, its
background processes, its limits over all its processes, and its end. Real bubblewrap as the
server runs it (skipped where it cannot make a sandbox), real processes."""

from __future__ import annotations

import os
import shlex
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from modules.sandbox.factory import runner_for, sessions_of
from modules.sandbox.resource_limits import ResourceLimits
from modules.sandbox.runner import CommandResult, CommandRunner
from modules.sandbox.session.background import ProcessLimitReached
from modules.sandbox.session.launcher import LocalLauncher
from modules.sandbox.session.output_store import LOG_BYTES, RING_BYTES
from modules.sandbox.session.pool import SessionPool
from modules.sandbox.session.session import SandboxSession
from modules.sandbox.session.supervised import BACKGROUND_RATE
from tests.kit.processes import live_command_lines
from tests.kit.tools import make_ctx
from tests.kit.waits import wait_until
from utils.cancel import CancelToken, TaskCancelled

MB = 1024 * 1024
TOUCH = "b = bytearray({} * 2**20); b[::4096] = b'x' * len(b[::4096])\n"
HOLD = "import time; print('held', flush=True); time.sleep(300)"
FORK_200 = """
import os, time
n = 0
try:
    for _ in range(200):
        if os.fork() == 0:
            time.sleep(3)
            os._exit(0)
        n += 1
except OSError as exc:
    print("stopped after", n, exc)
"""


@pytest.fixture
def extra_settings() -> dict[str, Any]:
    """Settings a test gives its runner (parametrize it to change them)."""
    return {}


@pytest.fixture
def runner(tmp_path: Path, extra_settings: dict[str, Any]) -> Iterator[CommandRunner]:
    """A local runner as the server builds it."""
    ctx = make_ctx(tmp_path, sandbox="local", **extra_settings)
    built = runner_for(ctx.settings)
    if built.kind != "bubblewrap":
        pytest.skip("bubblewrap is not installed or cannot create a sandbox here")
    try:
        yield built
    finally:
        built.close()


@pytest.fixture
def pool(runner: CommandRunner) -> SessionPool:
    """Its sessions, one per conversation."""
    sessions = sessions_of(runner)
    assert sessions is not None
    return sessions


def local_limits(pool: SessionPool) -> ResourceLimits:
    """The limits of the local runner whose sessions `pool` keeps."""
    assert isinstance(pool.launcher, LocalLauncher)
    return pool.launcher.limits


def run(
    pool: SessionPool, session: SandboxSession, command: str, timeout: float = 20, **options: Any
) -> CommandResult:
    """`bash -c command` in the session, in the workspace, collecting nothing on the side."""
    cancel = options.pop("cancel", CancelToken())
    return session.run(["bash", "-c", command], cwd=pool.settings.workspace, timeout=timeout,
                       cancel=cancel, on_output=lambda _: None, **options)  # fmt: skip


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_each_conversation_has_its_own_loopback_and_tmp(pool: SessionPool, tmp_path: Path) -> None:
    one, two = pool.session("conv-one"), pool.session("conv-two")
    port = free_port()
    for session in (one, two):
        result = run(pool, session, f"python3 -m http.server {port} >/dev/null 2>&1 &")
        assert result.left and result.left[0].ports == (port,), result
    assert run(pool, one, "echo one > /tmp/note").exit_code == 0
    assert run(pool, one, "cat /tmp/note").output == "one\n"  # the next command sees it
    assert "No such file" in run(pool, two, "cat /tmp/note").output  # the other conversation not


def test_a_background_process_is_started_read_written_stopped_and_listed(pool: SessionPool) -> None:
    session = pool.session("conv-bg")
    ws = pool.settings.workspace
    first = session.start("echo ready; while read line; do echo got $line; done", ws, settle=5)
    process_id = first.info.record.id
    assert first.text == "ready\n" and first.info.record.running
    assert session.write(process_id, "hello\n") == 6
    got = session.read(process_id, wait=10, until=lambda text: "got hello" in text)
    assert got.text == "got hello\n" and got.offset == first.next_offset
    assert session.read(process_id).text == ""  # nothing unread
    assert session.read(process_id, offset=0).text == "ready\ngot hello\n"
    stopped = session.stop(process_id)
    assert stopped.record.end_reason == "stopped" and stopped.record.signal == 15
    quick = session.start("echo bye; exit 4", ws, settle=5)
    assert quick.text == "bye\n"
    wait_until(lambda: not session.processes()[1].record.running, 5, "its end")
    listed = {i.record.id: i.record for i in session.processes()}
    assert listed[quick.info.record.id].exit_code == 4
    assert listed[quick.info.record.id].end_reason == "exited"
    index = (pool.settings.data_dir / "processes" / "conv-bg" / "index.json").read_text()
    assert '"end_reason": "stopped"' in index
    log = pool.settings.data_dir / "processes" / "conv-bg" / f"{process_id}.log"
    wait_until(lambda: log.read_text() == "ready\ngot hello\n", 5, "its log on disk")


@pytest.mark.parametrize("extra_settings", [dict(max_processes=2)])
def test_at_most_max_processes_run_and_one_past_it_is_killed_and_said(pool: SessionPool) -> None:
    session = pool.session("conv-limit")
    ws = pool.settings.workspace
    session.start("sleep 300", ws, settle=0)
    result = run(pool, session, "sleep 301 &")
    assert result.left[0].process_id == "p2"
    with pytest.raises(ProcessLimitReached, match="at most 2 background processes"):
        session.start("sleep 302", ws, settle=0)
    over = run(pool, session, "sleep 303 &")
    assert over.left and over.left[0].process_id is None and over.left[0].command == "sleep 303"
    wait_until(lambda: not any("sleep 303" in line for line in live_command_lines().values()),
               5, "the one past the limit killed")  # fmt: skip


def test_what_a_command_leaves_running_is_said_even_when_it_is_a_daemon(pool: SessionPool) -> None:
    session = pool.session("conv-daemon")
    result = run(pool, session, "setsid sleep 310 >/dev/null 2>&1 < /dev/null & echo started")
    assert result.output == "started\n" and result.exit_code == 0
    assert [(left.command, left.process_id) for left in result.left] == [("sleep 310", "p1")]


def test_a_timeout_or_cancel_ends_everything_the_command_started(pool: SessionPool) -> None:
    session = pool.session("conv-stop")
    marker = f"sleep 1.{time.time_ns() % 10**6:06d}"
    started = time.monotonic()
    result = run(
        pool, session, f"({marker}; touch late.txt) & setsid {marker} & sleep 60", timeout=0.5
    )
    assert result.timed_out and result.exit_code is None and not result.left
    assert time.monotonic() - started < 3
    wait_until(lambda: not any(marker in line for line in live_command_lines().values()), 5,
               "the end of every process of the command")  # fmt: skip
    cancel = CancelToken()
    threading.Timer(0.3, cancel.cancel).start()
    started = time.monotonic()
    with pytest.raises(TaskCancelled):
        run(pool, session, "sleep 60 & sleep 60", cancel=cancel)
    assert time.monotonic() - started < 1.3
    assert not session.processes()
    assert not (pool.settings.workspace / "late.txt").exists()  # its writer ended unheard


@pytest.mark.skipif(os.geteuid() != 0, reason="the session's cgroup is made as root only")
@pytest.mark.parametrize("extra_settings", [dict(local_sandbox={"total_memory_mb": 200})])
def test_the_memory_limit_covers_every_process_of_the_session(pool: SessionPool) -> None:
    if local_limits(pool).roots.memory is None:
        pytest.skip("no writable memory cgroup here")
    session = pool.session("conv-memory")
    held = session.start(f"python3 -c {shlex.quote(TOUCH.format(130) + HOLD)}",
                         pool.settings.workspace, settle=10)  # fmt: skip
    assert held.text == "held\n", held
    result = run(pool, session, f"python3 -c {shlex.quote(TOUCH.format(120))}")
    killed = "While this command ran, 1 process(es) of this conversation's sandbox session were"
    assert killed in result.note, result
    assert "memory limit of 200 MB" in result.note
    record = next(i.record for i in session.processes())
    assert record.end_reason == "killed_limit" or result.exit_code == -9, (record, result)


@pytest.mark.skipif(os.geteuid() != 0, reason="the session's pids cgroup is made as root only")
@pytest.mark.parametrize("extra_settings", [dict(local_sandbox={"processes": 40})])
def test_the_process_limit_covers_every_process_of_the_session(pool: SessionPool) -> None:
    if local_limits(pool).roots.pids is None:
        pytest.skip("no writable pids cgroup here")
    session = pool.session("conv-pids")
    for _ in range(3):
        session.start("sleep 300", pool.settings.workspace, settle=0)
    result = run(pool, session, "python3 -", stdin=FORK_200)
    forked = int(result.output.split("stopped after")[1].split()[0])
    assert forked <= 40 - 3 - 1, result.output  # the supervisor and the sleeps count too


def test_a_flood_of_output_is_read_at_a_bounded_rate_into_a_bounded_store(
    pool: SessionPool,
) -> None:
    session = pool.session("conv-flood")
    flood = session.start("yes flood", pool.settings.workspace, settle=0)
    began = time.monotonic()
    other = pool.session("conv-quiet")
    slowest = 0.0
    while time.monotonic() - began < 3:
        started = time.monotonic()
        assert run(pool, other, "echo quiet").output == "quiet\n"
        slowest = max(slowest, time.monotonic() - started)
    elapsed = time.monotonic() - began
    end = session.read(flood.info.record.id).info.output_end
    assert end <= BACKGROUND_RATE * (elapsed + 1), end  # read no faster than its rate
    assert end > BACKGROUND_RATE * 0.5, end  # and read all along
    assert len(session.sandbox.background["p1"].output.ring._data) <= RING_BYTES
    folder = pool.settings.data_dir / "processes" / "conv-flood"
    assert sum(p.stat().st_size for p in folder.glob("p1.log*")) <= 2 * LOG_BYTES
    assert slowest < 1.0, f"another conversation's command took {slowest:.2f} s meanwhile"


@pytest.mark.parametrize("extra_settings", [dict(session_idle_minutes=0.02)])
def test_an_idle_session_ends_with_its_processes(pool: SessionPool) -> None:
    session = pool.session("conv-idle")
    session.start("sleep 300", pool.settings.workspace, settle=0)
    ended = wait_until(lambda: [r for r in pool.history("conv-idle") if not r.running], 10,
                       "the idle session's end")  # fmt: skip
    assert [(r.id, r.end_reason) for r in ended] == [("p1", "session_idle")]
    assert session.ended
    assert pool.session("conv-idle") is not session  # the next use starts a new one


def test_deleting_a_conversation_ends_its_session_and_forgets_its_processes(
    pool: SessionPool,
) -> None:
    session = pool.session("conv-gone")
    session.start("sleep 320", pool.settings.workspace, settle=0)
    pool.delete("conv-gone")
    assert session.ended
    assert not (pool.settings.data_dir / "processes" / "conv-gone").exists()
    wait_until(
        lambda: not any("sleep 320" in c for c in live_command_lines().values()), 5, "none left"
    )


def test_a_session_started_from_a_thread_that_ended_lives_on(pool: SessionPool) -> None:
    """bubblewrap's --die-with-parent fires at the end of the thread that started it."""
    made: list[SandboxSession] = []
    starter = threading.Thread(target=lambda: made.append(pool.session("conv-thread")))
    starter.start()
    starter.join()
    assert run(pool, made[0], "sleep 0.5; echo alive").output == "alive\n"
    assert made[0].sandbox.launched.process.poll() is None and not made[0].ended


def test_closing_the_pool_ends_every_session_and_leaves_no_process(pool: SessionPool) -> None:
    for name in ("conv-a", "conv-b"):
        pool.session(name).start("sleep 330", pool.settings.workspace, settle=0)
    started = time.monotonic()
    pool.close()
    assert time.monotonic() - started < 5
    for name in ("conv-a", "conv-b"):
        assert [r.end_reason for r in pool.history(name)] == ["server_stopped"]
    sandboxes = f"--bind {pool.settings.workspace} "  # its supervisor is its child
    left = [c for c in live_command_lines().values() if "sleep 330" in c or sandboxes in c]
    assert not left


def test_a_sandbox_that_dies_under_a_command_says_so_and_the_next_gets_a_new_one(
    pool: SessionPool,
) -> None:
    session = pool.session("conv-died")
    session.start("sleep 360", pool.settings.workspace, settle=0)
    killer = threading.Timer(0.5, session.sandbox.launched.process.kill)  # bwrap, from outside
    killer.start()
    result = run(pool, session, "sleep 60")
    killer.join()
    assert result.exit_code == -9 and not result.timed_out, result
    assert "[Stopped: this conversation's sandbox session has ended (session_ended)" in result.note
    assert [r.end_reason for r in pool.history("conv-died")] == ["session_ended"]
    again = pool.session("conv-died")
    assert again is not session and run(pool, again, "echo anew").output == "anew\n"


def test_a_process_on_a_terminal_of_its_own(pool: SessionPool) -> None:
    """The seam the person's terminal uses: a PTY of the asked size, written and read."""
    sandbox = pool.session("conv-tty").sandbox
    proc = sandbox.spawn(["bash", "-c", "read line; echo got $line; stty size; tty"],
                         pool.settings.workspace, stdin=True, terminal=(30, 100))  # fmt: skip
    assert proc.stdin is not None
    os.write(proc.stdin, b"hello\n")
    sandbox.wait(lambda: b"/dev/pts/" in proc.output.ring.read(0, 4096).data, 10)
    shown = proc.output.ring.read(0, 4096).data.decode()
    assert "got hello" in shown and "30 100" in shown and "/dev/pts/0" in shown, shown
    sandbox.forget(proc)
