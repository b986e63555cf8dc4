"""A person's terminal in a conversation's sandbox session: an interactive bash on a PTY of
its own, in the session's process tree, network and files (never on the host). Its output is
kept in the process's ring (the scrollback, RING_BYTES); the session's index lists it as a
process of origin `user`, so the agent's process tools see it."""

from __future__ import annotations

import contextlib
import fcntl
import os
import struct
import termios
import time
from pathlib import Path

from modules.sandbox.session.output_store import Text
from modules.sandbox.session.process import Proc
from modules.sandbox.session.records import EndReason, ProcessRecord
from modules.sandbox.session.supervised import SupervisedSandbox

COMMAND = "bash (terminal)"  # how the process tools list it
ARGV = ["env", "TERM=xterm-256color", "COLORTERM=truecolor", "bash", "-i"]
WRITE_SECONDS = 2.0  # for the shell to take a frame of input
END_SECONDS = 2.0  # after SIGHUP, before SIGKILL


class SessionTerminal:
    """One PTY and its shell in a session; every method may be called from any thread."""

    def __init__(self, sandbox: SupervisedSandbox, proc: Proc, record: ProcessRecord) -> None:
        self.sandbox = sandbox
        self.proc = proc
        self.record = record
        self.size = (0, 0)

    @property
    def id(self) -> str:
        return self.record.id

    @classmethod
    def open(cls, sandbox: SupervisedSandbox, cwd: Path, rows: int, cols: int) -> SessionTerminal:
        """Start the shell on a PTY of `rows` x `cols` in `cwd` (a workspace path)."""
        proc = sandbox.spawn(ARGV, cwd, stdin=True, terminal=(rows, cols))
        with sandbox.changed:
            record = ProcessRecord(sandbox.index.next_id(), proc.pid, COMMAND, "user")
            sandbox.index.put(record)
        terminal = cls(sandbox, proc, record)
        terminal.size = (rows, cols)
        return terminal

    @property
    def ended(self) -> bool:
        """Its shell exited (or the session ended)."""
        with self.sandbox.changed:
            return self.proc.main_exit is not None or self.sandbox.closed

    @property
    def end(self) -> int:
        """The offset after all it has written."""
        with self.sandbox.changed:
            return self.proc.output.ring.end

    def read(self, offset: int, limit: int) -> Text:
        """Its output from `offset` as text (whole characters), at most `limit` bytes."""
        with self.sandbox.changed:
            return self.proc.output.read_text(offset, limit)

    def wait(self, offset: int, timeout: float) -> bool:
        """Wait until it wrote past `offset` or ended; whether it did."""
        return self.sandbox.wait(
            lambda: self.proc.output.ring.end > offset or self.proc.main_exit is not None,
            timeout,
        )

    def write(self, data: bytes) -> int:
        """Type `data`; the bytes the shell took within WRITE_SECONDS."""
        written = 0
        deadline = time.monotonic() + WRITE_SECONDS
        while written < len(data) and time.monotonic() < deadline:
            try:
                with self.sandbox.changed:  # not closed meanwhile: its number may be reused
                    if self.proc.stdin is None:
                        break
                    written += os.write(self.proc.stdin, data[written:])
            except BlockingIOError:  # the PTY's input queue is full
                self.sandbox.wait(lambda: self.proc.main_exit is not None, 0.01)
            except OSError:
                break
        self.sandbox.touch()
        return written

    def resize(self, rows: int, cols: int) -> None:
        """Set its window size (its foreground programs get SIGWINCH)."""
        with self.sandbox.changed, contextlib.suppress(OSError):
            if self.proc.stdin is not None:
                winsize = struct.pack("HHHH", rows, cols, 0, 0)
                fcntl.ioctl(self.proc.stdin, termios.TIOCSWINSZ, winsize)
                self.size = (rows, cols)

    def close(self) -> None:
        """End its shell and what runs in its process session (HUP, then KILL), keep what
        they wrote last, and forget it."""
        self.hang_up()
        self.release()

    def hang_up(self) -> None:
        """End what still runs in its process session, as a terminal that closes does (HUP,
        then KILL), and wait for the rest of their output."""
        if self.sandbox.closed:
            return
        for sig in ("HUP", "KILL"):
            if self.sandbox.wait(lambda: self.proc.ended, 0):
                break
            self.sandbox.signal(self.proc, sig)
            self.sandbox.wait(lambda: self.proc.ended, END_SECONDS)
        self.sandbox.wait(lambda: self.proc.output.eof, END_SECONDS)

    def release(self) -> None:
        """Stop reading it, close its PTY and write its end into the session's index (once)."""
        with self.sandbox.changed:
            if not self.record.running:
                return
            code, sig = self.proc.main_exit or (None, None)
            reason: EndReason = "exited" if self.proc.main_exit else "stopped"
            self.record = self.record.ended(self.sandbox.end_reason or reason, code, sig)
            self.sandbox.index.put(self.record)
            stdin, self.proc.stdin = self.proc.stdin, None
        self.sandbox.forget(self.proc)
        if stdin is not None:
            os.close(stdin)
