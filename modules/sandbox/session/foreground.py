"""A foreground command in a conversation's session: what `run_command` and `run_python` run.

For the model it behaves as a command in a fresh sandbox did: output streamed and capped, a
timeout (SIGTERM, a grace, SIGKILL) or a cancel (SIGKILL) ending all it started, the disk
floor's and the memory limit's notes. What it leaves running when it exits by itself (`cmd &`,
a daemon) is not killed: it is adopted as a background process, up to the limit (beyond it,
killed), and the result says which (`CommandResult.left`).
"""

from __future__ import annotations

import codecs
import contextlib
import fcntl
import os
import re
import shlex
import struct
import termios
import threading
import time
from collections.abc import Callable
from typing import Any, Unpack

from modules.sandbox.resource_limits import memory_note
from modules.sandbox.runner import CommandResult, LeftRunning, RunOptions, finished
from modules.sandbox.session.output_store import Capture
from modules.sandbox.session.process import Proc
from modules.sandbox.session.records import ProcessRecord
from modules.sandbox.session.supervised import SupervisedSandbox

EXIT_DRAIN_SECONDS = 0.5  # after it exits, for the rest of its output
KILL_GRACE_SECONDS = 1.0  # between SIGTERM and SIGKILL at a timeout
ADOPT_PORT_SECONDS = 0.5  # for what it left running to listen, so its result names the port
NAME_SECONDS = 0.3  # for a process it forked to exec its program, so its result names that
STREAM_BYTES = 65536
CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def run_foreground(
    session: SupervisedSandbox, kind: str, argv: list[str], **options: Unpack[RunOptions]
) -> CommandResult:
    """Run `argv` in the session to its end, timeout or cancellation."""
    cancel, text = options["cancel"], options.get("stdin")
    cancel.raise_if_cancelled()
    session.config.disk_floor.refuse_if_short()
    started = time.monotonic()
    with session.in_use():
        known = {entry["sid"] for entry in session.procs()}
        cgroup = session.launched.cgroup
        mark = (0, 0) if cgroup is None else cgroup.memory_mark()
        capture = Capture(session.config.output_limit)
        proc = session.spawn(argv, options["cwd"], stdin=text is not None, capture=capture)
        run = _Run(session, proc, options["on_output"])
        unregister = cancel.on_cancel(run.wake)
        try:
            if text is not None:
                _feed_stdin(proc.stdin, text)
                proc.stdin = None  # the feeding thread's to close
            exited = run.until(lambda: proc.main_exit is not None or cancel.cancelled,
                               started + options["timeout"])  # fmt: skip
            if exited and not cancel.cancelled and not session.closed:
                left = _leave(session, run, argv, known)
            else:
                run.stop(known, "KILL" if cancel.cancelled else "TERM")
                left = ()
        finally:
            unregister()
            session.forget(proc)
    timed_out = not exited and not cancel.cancelled and not session.closed
    code, signal = proc.main_exit or (None, 9)
    exit_code = None if timed_out else (code if code is not None else -(signal or 9))
    note = _note(session, mark)
    result = finished(argv, kind, started, cancel, (exit_code, timed_out), capture.buffer, note)
    result.left = left
    return result


class _Run:
    """A running foreground command: its output streamed to `on_output` from this thread."""

    def __init__(self, session: SupervisedSandbox, proc: Proc, on_output: Callable[[str], None]):
        self.session = session
        self.proc = proc
        self.on_output = on_output
        self.offset = 0
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def wake(self) -> None:
        with self.session.changed:
            self.session.changed.notify_all()

    def until(self, done: Callable[[], bool], deadline: float) -> bool:
        """Stream output until `done()` (checked holding the lock) or the deadline; whether
        it is done (the session's end counts as done)."""
        output = self.proc.output
        while True:
            finished = self.session.wait(
                lambda: done() or output.ring.end > self.offset,
                max(0.0, deadline - time.monotonic()),
            )
            self.stream()
            with self.session.changed:
                if done() or self.session.closed:
                    return True
            if not finished or time.monotonic() >= deadline:
                return False

    def stream(self) -> None:
        """Pass on the output not streamed yet."""
        with self.session.changed:
            chunk = self.proc.output.ring.read(self.offset, STREAM_BYTES * 4)
            eof = self.proc.output.eof and chunk.next_offset >= self.proc.output.ring.end
        self.offset = chunk.next_offset
        text = self.decoder.decode(chunk.data, final=eof)
        if chunk.skipped:
            text = f"\n… [{chunk.skipped} bytes not shown live] …\n{text}"
        if text:
            self.on_output(text)

    def drain(self, seconds: float, everything: bool = True) -> None:
        """Stream output until its end (every writer closed the pipe), or for `seconds`;
        with `everything` False, only until what the pipe held now was read."""
        output = self.proc.output
        target: int | None = None
        if not everything:
            with self.session.changed:
                target = output.ring.end + _unread(self.proc.out_fd)
        self.until(
            lambda: output.eof or (target is not None and output.ring.end >= target),
            time.monotonic() + seconds,
        )

    def stop(self, known: set[int], first: str) -> None:
        """End the command and whatever it started: `first` (TERM: at its timeout, then KILL
        after the grace; KILL: at a cancel)."""
        session = self.session
        behind = _left_behind(session, self.proc, known)
        session.kill_sids({entry["sid"] for entry in behind}, first)
        deadline = time.monotonic() + (KILL_GRACE_SECONDS if first != "KILL" else 0)
        while behind := _left_behind(session, self.proc, known):
            if time.monotonic() >= deadline:
                session.kill_sids({entry["sid"] for entry in behind}, "KILL")
            if time.monotonic() >= deadline + KILL_GRACE_SECONDS:
                break
            session.wait(lambda: False, 0.05)
        self.drain(KILL_GRACE_SECONDS)


def _left_behind(session: SupervisedSandbox, proc: Proc, known: set[int]) -> list[dict[str, Any]]:
    """The live processes of `proc`'s command: those of its process session, and those of a
    session that appeared while it ran and belongs to nothing tracked (a daemon that called
    setsid)."""
    if session.closed:
        return []
    try:
        listed = session.procs()
    except OSError:
        return []
    with session.changed:
        others = set(session.by_sid) - proc.sids
    return [e for e in listed if e["sid"] == proc.pid or e["sid"] not in known | others]


def _leave(
    session: SupervisedSandbox, run: _Run, argv: list[str], known: set[int]
) -> tuple[LeftRunning, ...]:
    """The command `argv` exited: what it left running is adopted (or killed past the
    limit), once it had a moment to listen on a port."""
    proc = run.proc
    survivors = _left_behind(session, proc, known)
    if not survivors:
        run.drain(EXIT_DRAIN_SECONDS)
        return ()
    run.drain(EXIT_DRAIN_SECONDS, everything=False)  # what it wrote before it exited
    with session.changed:
        proc.output.capture = None
    if len(session.running()) >= session.config.max_processes:
        survivors = _named(session, proc, known, argv) or survivors
        session.kill_sids({entry["sid"] for entry in survivors})
        return (LeftRunning(None, survivors[0]["pid"], _name(survivors, argv), ()),)
    ports = _ports_of(session, {entry["sid"] for entry in survivors}, ADOPT_PORT_SECONDS)
    survivors = _named(session, proc, known, argv)
    if not survivors:  # it ended meanwhile
        return ()
    command = _name(survivors, argv)
    with session.changed:
        record = ProcessRecord(session.index.next_id(), survivors[0]["pid"], command)
        session.adopt(proc, {entry["sid"] for entry in survivors}, record)
    return (LeftRunning(record.id, record.pid, command, ports),)


def _named(
    session: SupervisedSandbox, proc: Proc, known: set[int], argv: list[str]
) -> list[dict[str, Any]]:
    """What the command left behind, once the processes it forked had a moment to exec
    their programs (a fork still shows the command's own argv)."""
    deadline = time.monotonic() + NAME_SECONDS
    while True:
        behind = _left_behind(session, proc, known)
        if time.monotonic() >= deadline or all(entry["argv"] != argv for entry in behind):
            return sorted(behind, key=lambda entry: entry["pid"])
        session.wait(lambda: False, 0.02)


def _name(survivors: list[dict[str, Any]], argv: list[str]) -> str:
    """What a group of processes left behind is called: its first process that is not a
    copy of the command's shell (a subshell), and how many more there are."""
    named = [entry for entry in survivors if entry["argv"] != argv] or survivors
    first = min(named, key=lambda entry: entry["pid"])
    command = CONTROL.sub("?", shlex.join(first["argv"])) or "?"  # one line, whatever it says
    if len(survivors) > 1:
        command += f" (and {len(survivors) - 1} more processes)"
    return command


def _ports_of(session: SupervisedSandbox, sids: set[int], seconds: float) -> tuple[int, ...]:
    """The ports `sids` listen on, waiting up to `seconds` for one while they live."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            found = sorted({p.port for p in session.ports() if p.sid in sids})
            alive = any(entry["sid"] in sids for entry in session.procs())
        except OSError:
            return ()
        if found or not alive or time.monotonic() >= deadline:
            return tuple(found)
        session.wait(lambda: False, 0.1)


def _note(session: SupervisedSandbox, mark: tuple[int, int]) -> str:
    """The disk floor's or the memory limit's line, when the command met one, or why its
    session ended under it."""
    if session.shortage is not None:
        return session.shortage.stop_note()
    if session.closed:
        return (
            f"[Stopped: {session.ended_text()}, and this command with it. The next command "
            "starts a new session (its /tmp and background processes are gone)]"
        )
    cgroup = session.launched.cgroup
    kills, own_limit = (0, False) if cgroup is None else cgroup.out_of_memory(mark)
    if not kills:
        return ""
    return memory_note(kills, own_limit, session.config.memory_mb, session=True)


def _unread(fd: int) -> int:
    """Bytes waiting in a pipe (0 when it cannot be told)."""
    try:
        raw: Any = fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0")
        return int(struct.unpack("i", raw)[0])
    except OSError:
        return 0


def _feed_stdin(fd: int | None, text: str) -> None:
    """Write stdin from a thread so a command that prints before reading cannot deadlock."""

    def write() -> None:
        if fd is None:
            return
        data = text.encode("utf-8")
        with contextlib.suppress(OSError):
            while data:
                data = data[os.write(fd, data) :]
        with contextlib.suppress(OSError):
            os.close(fd)

    threading.Thread(target=write, name="command-stdin", daemon=True).start()
