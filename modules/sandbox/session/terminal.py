"""A person's terminal in a conversation's sandbox session: an interactive bash on a PTY of
its own, in the session's process tree, network and files (never on the host). Its reader
(one caller, core/terminals.py's relay) reads the PTY's master itself, not through the
session's pump: a keystroke's echo takes no extra hop, and a flood waits on the PTY while
the reader is busy sending rather than overrunning anything. The last RING_BYTES are kept
(the scrollback). The session's index lists it as a process of origin `user`, so the agent's
process tools see it."""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
import struct
import termios
import time
from dataclasses import dataclass
from pathlib import Path

from modules.sandbox.session.os_threads import original, sleep
from modules.sandbox.session.output_store import OutputRing, cut_start, whole_end
from modules.sandbox.session.process import Proc
from modules.sandbox.session.records import EndReason, ProcessRecord
from modules.sandbox.session.supervised import SupervisedSandbox

COMMAND = "bash (terminal)"  # how the process tools list it
ARGV = ["env", "TERM=xterm-256color", "COLORTERM=truecolor", "bash", "-i"]
READ_BYTES = 64 * 1024
RING_BYTES = 256 * 1024
WRITE_SECONDS = 2.0  # for the PTY to take a frame of input
END_SECONDS = 2.0  # after SIGHUP, before SIGKILL
FOREGROUND_CHARS = 120  # of the command line of what runs in a terminal, as it is listed


@dataclass(frozen=True)
class Output:
    """Text it wrote: from byte `offset` to `next_offset`, whole characters only."""

    text: str
    offset: int
    next_offset: int


class SessionTerminal:
    """One PTY and its shell in a session. `readable` and `read` are for one reader; the rest
    may be called from any thread."""

    def __init__(self, sandbox: SupervisedSandbox, proc: Proc, record: ProcessRecord) -> None:
        self.sandbox = sandbox
        self.proc = proc
        self.record = record
        self.size = (0, 0)
        self.ring = OutputRing(RING_BYTES)  # whole characters only (but after an overrun)
        self._cut = b""  # the start of a character its next read completes
        self._fd_lock = original("threading").Lock()  # the master is not closed under a write

    @property
    def id(self) -> str:
        return self.record.id

    @classmethod
    def open(cls, sandbox: SupervisedSandbox, cwd: Path, rows: int, cols: int) -> SessionTerminal:
        """Start the shell on a PTY of `rows` x `cols` in `cwd` (a workspace path)."""
        proc = sandbox.spawn(ARGV, cwd, stdin=True, terminal=(rows, cols), pumped=False)
        with sandbox.changed:
            record = ProcessRecord(
                sandbox.index.next_id(), proc.pid, COMMAND, "user", terminal=True
            )
            sandbox.index.put(record)
        assert proc.stdin is not None
        os.set_blocking(proc.stdin, False)  # a write never blocks the op that types
        terminal = cls(sandbox, proc, record)
        terminal.size = (rows, cols)
        return terminal

    @property
    def shell_exited(self) -> bool:
        """Its shell exited (or the session ended)."""
        with self.sandbox.changed:
            return self.proc.main_exit is not None or self.sandbox.closed

    def readable(self, timeout: float) -> bool:
        """Wait up to `timeout` for output (or its end) to read."""
        fd = self.proc.stdin
        if fd is None:
            return True
        ready, _, _ = select.select([fd], [], [], timeout)  # green under eventlet
        return bool(ready)

    def read(self) -> Output | None:
        """The next output (nothing when there was none yet: wait with `readable`); None at
        its end (every process on its PTY is gone)."""
        fd = self.proc.stdin
        try:
            data = os.read(fd, READ_BYTES) if fd is not None else b""
        except BlockingIOError:
            return Output("", self.ring.end, self.ring.end)
        except OSError:  # EIO: the terminal's other side closed
            data = b""
        if not data:
            return None
        data, self._cut = self._cut + data, b""
        end = whole_end(data)
        data, self._cut = data[:end], data[end:]
        offset = self.ring.end
        self.ring.append(data)
        self.sandbox.touch()
        return Output(data.decode("utf-8", errors="replace"), offset, self.ring.end)

    def scrollback(self) -> Output:
        """What the ring holds, as text (called holding the reader's lock)."""
        chunk = self.ring.read(0, RING_BYTES)
        skip = cut_start(chunk.data)
        begin = chunk.next_offset - len(chunk.data) + skip
        return Output(chunk.data[skip:].decode("utf-8", errors="replace"), begin, chunk.next_offset)

    def write(self, data: bytes) -> int:
        """Type `data`; the bytes the PTY took within WRITE_SECONDS (its input queue is
        full while the program on it reads nothing)."""
        written = 0
        deadline = time.monotonic() + WRITE_SECONDS
        while written < len(data):
            with self._fd_lock:
                if self.proc.stdin is None:
                    break
                with contextlib.suppress(BlockingIOError):
                    written += os.write(self.proc.stdin, data[written:])
                    continue
            if time.monotonic() >= deadline:
                break
            sleep(0.01)
        self.sandbox.touch()
        return written

    def resize(self, rows: int, cols: int) -> None:
        """Set its window size (its foreground programs get SIGWINCH)."""
        with self._fd_lock, contextlib.suppress(OSError):
            if self.proc.stdin is not None:
                winsize = struct.pack("HHHH", rows, cols, 0, 0)
                fcntl.ioctl(self.proc.stdin, termios.TIOCSWINSZ, winsize)
                self.size = (rows, cols)

    def hang_up(self) -> None:
        """End everything in its process session, as a terminal that closes does (HUP, then
        KILL): its reader then comes to the end."""
        if self.sandbox.closed:
            return
        for sig in ("HUP", "KILL"):
            if self.sandbox.wait(lambda: self.proc.ended, 0):
                return
            self.sandbox.signal(self.proc, sig)
            self.sandbox.wait(lambda: self.proc.ended, END_SECONDS)

    def release(self) -> None:
        """Close its PTY and write its end into the session's index (once; after its reader
        came to the end)."""
        with self.sandbox.changed:
            if not self.record.running:
                return
            code, sig = self.proc.main_exit or (None, None)
            reason: EndReason = "exited" if self.proc.main_exit else "stopped"
            self.record = self.record.ended(self.sandbox.end_reason or reason, code, sig)
            self.sandbox.index.put(self.record)
        with self._fd_lock:
            self.sandbox.forget(self.proc)  # closes the master (Proc.stdin)
            self.proc.stdin = None


def foreground(sandbox: SupervisedSandbox, record: ProcessRecord) -> str | None:
    """What runs in the foreground of the terminal of `record` now: its command line (cut,
    printable characters only: it is the sandbox's to write); None at the shell's prompt, after
    the terminal's end, or when it cannot be told."""
    with sandbox.changed:  # the master is closed only once its proc has left by_pid
        proc = sandbox.by_pid.get(record.pid)
        master = proc.stdin if proc is not None and record.running else None
        if master is None:
            return None
        try:
            group = os.tcgetpgrp(master)  # as a pid of this server's namespace
            if group <= 0 or os.getsid(group) == group:  # the shell itself leads its session
                return None
            raw = Path(f"/proc/{group}/cmdline").read_bytes()[:4096]
        except OSError:
            return None
    words = (part.decode("utf-8", "replace") for part in raw.split(b"\0") if part)
    line = "".join(c for c in " ".join(words) if c.isprintable())
    return line[:FOREGROUND_CHARS] or None
