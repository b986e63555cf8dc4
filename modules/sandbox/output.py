"""A running command's output as both runners read it: streamed as it comes, decoded, capped."""

from __future__ import annotations

import codecs
import selectors
import time
from collections.abc import Callable

READ_SIZE = 65536
POLL_SECONDS = 0.05
FIRST_IDLE_SECONDS = 0.001  # after end of output, the first wait for the exit status


class OutputBuffer:
    """Keeps the first and last characters of a stream within `limit`, counting the rest."""

    def __init__(self, limit: int) -> None:
        self.head_limit = limit * 2 // 3
        self.tail_limit = limit - self.head_limit
        self.head = ""
        self.tail = ""
        self.total = 0

    def add(self, text: str) -> None:
        """Take in the next piece of the stream."""
        self.total += len(text)
        room = self.head_limit - len(self.head)
        if room > 0:
            self.head += text[:room]
            text = text[room:]
        if text:
            self.tail = (self.tail + text)[-self.tail_limit :]

    @property
    def omitted(self) -> int:
        """How many characters were cut from the middle."""
        return self.total - len(self.head) - len(self.tail)

    def text(self) -> str:
        """Head and tail, with a marker counting what was cut between them."""
        if self.omitted:
            return f"{self.head}\n… [{self.omitted} characters omitted] …\n{self.tail}"
        return self.head + self.tail


class OutputReader:
    """Reads one file descriptor (a pipe or a socket) until end of file, never blocking long.

    `read(size)` takes the bytes (os.read or socket.recv); `unframe` turns what arrived into
    output bytes where the transport wraps them (Docker's multiplexed frames).
    """

    def __init__(
        self,
        fd: int,
        read: Callable[[int], bytes],
        limit: int,
        on_output: Callable[[str], None],
        *,
        unframe: Callable[[bytes], bytes] | None = None,
    ) -> None:
        self._read = read
        self._unframe = unframe
        self.buffer = OutputBuffer(limit)
        self.on_output = on_output
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.selector = selectors.DefaultSelector()
        self.selector.register(fd, selectors.EVENT_READ)
        self.eof = False
        self._idle = FIRST_IDLE_SECONDS

    def pump(self, wait: float) -> None:
        """Wait up to `wait` seconds for output and pass on one chunk of it."""
        if self.eof:  # waiting for the exit status: look again soon, then less often
            time.sleep(min(wait, self._idle))
            self._idle = min(self._idle * 2, POLL_SECONDS)
            return
        if not self.selector.select(wait):
            return
        try:
            chunk = self._read(READ_SIZE)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            chunk = b""
        if not chunk:
            self.eof = True
            return
        if self._unframe is not None:
            chunk = self._unframe(chunk)
        self._emit(self.decoder.decode(chunk))

    def until(self, deadline: float, done: Callable[[], bool]) -> bool:
        """Pump output until `done()` or the deadline; True when done."""
        while not done():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self.pump(min(left, POLL_SECONDS))
        return True

    def close(self) -> None:
        """Pass on what the decoder still holds and stop watching the descriptor."""
        self._emit(self.decoder.decode(b"", final=True))
        self.selector.close()

    def _emit(self, text: str) -> None:
        if text:
            self.buffer.add(text)
            self.on_output(text)
