"""One OS thread for the whole server that reads every session process's output pipe and PTY
master (non-blocking, one poll over all of them) into its sink: no thread per command, none
per line. A flood from one process waits on its full pipe rather than making the server copy
without end: its sink holds the stream until someone consumed what it took (then `resume`), or
has it read at a bounded rate."""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import time
from typing import Any, Protocol

from modules.sandbox.session.os_threads import new_condition, original, start_thread

log = logging.getLogger(__name__)

READ_BYTES = 256 * 1024  # the most one read takes
PIPE_BYTES = 1 << 20
POLL_READ = 0x001 | 0x008 | 0x010  # POLLIN, POLLERR, POLLHUP
RATE_WINDOW_SECONDS = 0.1


class Sink(Protocol):
    """Where one stream's bytes go; called on the pump's thread, briefly."""

    def take(self, data: bytes) -> bool:
        """Keep the bytes; False: read no more until `OutputPump.resume`."""
        ...

    def ended(self) -> None:
        """The stream ended: end of file, or an error reading it."""

    @property
    def rate(self) -> int | None:
        """Bytes a second it may be read at (None: as fast as it comes)."""


class _Stream:
    def __init__(self, fd: int, sink: Sink) -> None:
        self.fd = fd
        self.sink = sink
        self.window_start = 0.0
        self.window_bytes = 0
        self.paused_until: float | None = None
        self.held = False  # by its sink, until resumed

    @property
    def polled(self) -> bool:
        return self.paused_until is None and not self.held


class OutputPump:
    """Reads the registered descriptors on one thread, started when first needed. A
    descriptor given to `add` is the pump's: it closes it at its end or at `remove`."""

    def __init__(self) -> None:
        self._changed = new_condition()
        self._pending: list[tuple[str, int, Sink]] = []
        self._thread: Any = None
        self._wake_read, self._wake_write = os.pipe()
        os.set_blocking(self._wake_read, False)
        os.set_blocking(self._wake_write, False)

    def add(self, fd: int, sink: Sink) -> None:
        """Read `fd` into `sink` until its end."""
        os.set_blocking(fd, False)
        with contextlib.suppress(OSError):  # a PTY, or a pipe the system keeps smaller
            fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
        self._ask(("add", fd, sink))

    def remove(self, sink: Sink) -> None:
        """Stop reading into `sink` and close its descriptor (it hears nothing more, not even
        `ended`); nothing when its stream ended already."""
        self._ask(("remove", -1, sink))

    def resume(self, sink: Sink) -> None:
        """Read again the stream whose `take` said to hold it."""
        self._ask(("resume", -1, sink))

    def _ask(self, change: tuple[str, int, Sink]) -> None:
        with self._changed:
            self._pending.append(change)
            if self._thread is None:
                self._thread = start_thread(self._run, "session-output")
        with contextlib.suppress(BlockingIOError):
            os.write(self._wake_write, b"x")

    def _run(self) -> None:
        select, reader = original("select"), original("os").read
        poller = select.poll()
        poller.register(self._wake_read, select.POLLIN)
        streams: dict[int, _Stream] = {}
        while True:
            try:
                self._apply(poller, streams)
                timeout = self._resume(poller, streams)
                for fd, _ in poller.poll(None if timeout is None else timeout * 1000):
                    if fd == self._wake_read:
                        with contextlib.suppress(OSError):
                            reader(self._wake_read, 4096)
                    elif fd in streams:
                        self._read(reader, poller, streams, streams[fd])
            except Exception:  # the one reader of every session must outlive any error
                log.exception("the session output pump failed; going on")

    def _apply(self, poller: Any, streams: dict[int, _Stream]) -> None:
        with self._changed:
            changes, self._pending = self._pending, []
        for what, fd, sink in changes:
            if what == "add":
                streams[fd] = _Stream(fd, sink)
                poller.register(fd, POLL_READ)
                continue
            for stream in [s for s in streams.values() if s.sink is sink]:
                if what == "remove":
                    self._drop(poller, streams, stream)
                elif stream.held:
                    stream.held = False
                    if stream.polled:
                        poller.register(stream.fd, POLL_READ)

    def _drop(self, poller: Any, streams: dict[int, _Stream], stream: _Stream) -> None:
        streams.pop(stream.fd, None)
        if stream.polled:
            with contextlib.suppress(KeyError, ValueError):
                poller.unregister(stream.fd)
        with contextlib.suppress(OSError):
            os.close(stream.fd)

    def _read(self, reader: Any, poller: Any, streams: dict[int, _Stream], stream: _Stream) -> None:
        rate = stream.sink.rate
        size = READ_BYTES if rate is None else min(READ_BYTES, self._window_left(stream, rate))
        try:
            data = reader(stream.fd, size)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:  # a PTY master once its terminal closed: EIO
            data = b""
        if not data:
            self._drop(poller, streams, stream)
            self._tell(stream.sink.ended)
            return
        if self._tell(lambda: stream.sink.take(data)) is False:
            poller.unregister(stream.fd)
            stream.held = True
            return
        if rate is None:
            return
        stream.window_bytes += len(data)
        if stream.window_bytes >= rate * RATE_WINDOW_SECONDS:
            poller.unregister(stream.fd)
            stream.paused_until = stream.window_start + RATE_WINDOW_SECONDS

    @staticmethod
    def _window_left(stream: _Stream, rate: int) -> int:
        """What a stream read at `rate` may still take in its window (a new one when it is over):
        a read never takes more, so the rate holds however large READ_BYTES is."""
        now = time.monotonic()
        if now - stream.window_start >= RATE_WINDOW_SECONDS:
            stream.window_start, stream.window_bytes = now, 0
        return max(1, int(rate * RATE_WINDOW_SECONDS) - stream.window_bytes)

    def _resume(self, poller: Any, streams: dict[int, _Stream]) -> float | None:
        """Read again the streams whose pause is over; the wait until the next one's."""
        now = time.monotonic()
        soonest: float | None = None
        for stream in streams.values():
            if stream.paused_until is None:
                continue
            if stream.paused_until <= now:
                stream.paused_until = None
                stream.window_start, stream.window_bytes = now, 0
                if stream.polled:
                    poller.register(stream.fd, POLL_READ)
            else:
                left = stream.paused_until - now
                soonest = left if soonest is None else min(soonest, left)
        return soonest

    @staticmethod
    def _tell(call: Any) -> Any:
        try:
            return call()
        except Exception:
            log.exception("a session output sink failed")
            return None


PUMP = OutputPump()
