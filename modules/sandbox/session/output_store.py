"""Where a session process's output is kept: a bounded ring in memory, addressed by absolute
byte offsets, and a capped log file in the data folder; for a foreground command also the head
and tail its result gives the model, exactly as the fresh-sandbox runner keeps them."""

from __future__ import annotations

import codecs
import contextlib
import os
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path

from modules.sandbox.output import OutputBuffer
from modules.sandbox.session.pump import READ_BYTES

RING_BYTES = 1024 * 1024
HIGH_WATER = RING_BYTES - READ_BYTES  # not relayed yet above this: the stream is held
LOW_WATER = HIGH_WATER - READ_BYTES  # a held stream is read again once this much is left
LOG_BYTES = 4 * 1024 * 1024  # a log file rotates at this size: ID.log, then ID.log.1
LOG_FLUSH_SECONDS = 0.5  # a log writes what came at most this often (and at the end)


@dataclass(frozen=True)
class Text:
    """Output read as text: whole characters only, `next_offset` right after the last one's
    bytes, `skipped` bytes no longer held (or the rest of a character cut by the ring) before
    it."""

    text: str
    next_offset: int
    skipped: int


def whole_end(data: bytes) -> int:
    """The length of `data` without a UTF-8 character its end cuts short (at most 3 bytes
    fewer): what follows may still complete it."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte < 0x80:
            return len(data)
        if byte >= 0xC0:  # the lead byte of the last character
            needs = 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4 if byte < 0xF8 else 1
            return len(data) - back if needs > back else len(data)
    return len(data)  # continuation bytes with no lead: nothing can complete them


def cut_start(data: bytes) -> int:
    """How many continuation bytes `data` starts with (at most 3): the rest of a character
    whose start is not in it."""
    count = 0
    while count < min(3, len(data)) and 0x80 <= data[count] < 0xC0:
        count += 1
    return count


@dataclass(frozen=True)
class Chunk:
    """Output read from an offset: its bytes, where the next read starts, and how many bytes
    the ring no longer held between the offset asked for and the data."""

    data: bytes
    next_offset: int
    skipped: int


class OutputRing:
    """The last `capacity` bytes of a stream; `end` is the offset after everything written.
    The byte at offset o is kept at o % capacity: an append copies only its own bytes in
    (a ring that shifted its contents would copy all of them at every read of a flood)."""

    def __init__(self, capacity: int = RING_BYTES) -> None:
        self.capacity = capacity
        self._data = bytearray()  # grows to `capacity`, then is written over in place
        self.end = 0

    @property
    def start(self) -> int:
        """The offset of the oldest byte still held."""
        return self.end - len(self._data)

    def append(self, data: bytes) -> None:
        new = memoryview(data)
        room = self.capacity - len(self._data)
        if room > 0:  # still filling up (the byte at offset o at index o): onto the end
            self._data += new[:room]
            new = new[room:]
        self.end += len(data)
        new = new[max(0, len(new) - self.capacity) :]  # what is older would be overwritten anyway
        at = (self.end - len(new)) % self.capacity
        first = min(len(new), self.capacity - at)
        self._data[at : at + first] = new[:first]
        self._data[: len(new) - first] = new[first:]

    def read(self, offset: int, limit: int) -> Chunk:
        """At most `limit` bytes from `offset` (clamped to what is held)."""
        offset = max(0, min(offset, self.end))
        skipped = max(0, self.start - offset)
        begin = offset + skipped
        size = max(0, min(limit, self.end - begin))
        at = begin % self.capacity
        with memoryview(self._data) as held:  # no copy but the one into `data`
            data = b"".join((held[at : at + size], held[: max(0, at + size - len(held))]))
        return Chunk(data, begin + size, skipped)


class OutputLog:
    """A process's output in DATA_DIR/processes/CID/ID.log, at most LOG_BYTES, the older part
    kept in ID.log.1 (so at most twice that on disk). A write that fails (a full disk) ends the
    log, not the process.

    What comes within LOG_FLUSH_SECONDS of the last write waits in memory for the next `flush`
    (at most the two files' worth: a flood's older bytes would be rotated away unread), so a
    flood costs the disk at most that much a flush, not all it writes."""

    def __init__(self, path: Path, cap: int = LOG_BYTES) -> None:
        self.path = path
        self.cap = cap
        self.error: str | None = None
        self._fd: int | None = None
        self._size = 0
        self._pending: deque[bytes] = deque()  # what waits for `flush`, in the order it came
        self._pending_bytes = 0
        self._flushed_at = 0.0
        self._open()

    def _open(self) -> None:
        try:
            self._fd = os.open(
                self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600
            )
            self._size = os.fstat(self._fd).st_size
        except OSError as exc:
            self.error = str(exc)
            self._fd = None

    def write(self, data: bytes) -> None:
        if self._fd is None:
            return
        self._pending.append(data)
        self._pending_bytes += len(data)
        while self._pending_bytes - len(self._pending[0]) >= 2 * self.cap:
            self._pending_bytes -= len(self._pending.popleft())
        if time.monotonic() - self._flushed_at >= LOG_FLUSH_SECONDS:
            self.flush()

    def flush(self) -> None:
        """Write what waits."""
        pending = memoryview(b"".join(self._pending))[-2 * self.cap :]
        self._pending.clear()
        self._pending_bytes = 0
        self._flushed_at = time.monotonic()
        try:
            while pending and self._fd is not None:
                if self._size >= self.cap:
                    os.close(self._fd)
                    self._fd = None
                    os.replace(self.path, self.path.with_name(self.path.name + ".1"))
                    self._open()
                    continue
                written = os.write(self._fd, pending[: self.cap - self._size])
                self._size += written
                pending = pending[written:]
        except OSError as exc:
            self.error = str(exc)
            self.close()

    def close(self) -> None:
        if self._pending and self._fd is not None:
            self.flush()
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None


class Capture:
    """A foreground command's output as its result keeps it: decoded, head and tail."""

    def __init__(self, limit: int) -> None:
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.buffer = OutputBuffer(limit)

    def add(self, data: bytes, final: bool = False) -> None:
        text = self.decoder.decode(data, final=final)
        if text:
            self.buffer.add(text)


class ProcessOutput:
    """Everything one process wrote to its output pipe or PTY: ring, log once it has one,
    capture while it is a foreground command. Its owner's lock guards it.

    A relayed one (a background process's, in a server) is held, its bytes left in the pipe so
    the process waits on its write, while more than HIGH_WATER of the ring was not relayed:
    the ring never overruns the relay. Without a relay it is not held and the ring overruns."""

    def __init__(self, capture: Capture | None = None) -> None:
        self.ring = OutputRing()
        self.log: OutputLog | None = None
        self.capture = capture
        self.eof = False
        self.relayed: int | None = None  # the offset its relay sent it up to; None: no relay
        self.held = False

    def take(self, data: bytes) -> bool:
        """What the pump read; False: hold the stream (read it again once `relay_sent` says)."""
        self.ring.append(data)
        if self.log is not None:
            self.log.write(data)
        if self.capture is not None:
            self.capture.add(data)
        if self.relayed is not None and self.ring.end - self.relayed > HIGH_WATER:
            self.held = True
        return not self.held

    def relay_sent(self, offset: int) -> bool:
        """Its relay sent everything before `offset`; True when the held stream is to be read
        again."""
        if self.relayed is None:
            return False
        self.relayed = max(self.relayed, offset)
        if self.held and self.ring.end - self.relayed <= LOW_WATER:
            self.held = False
            return True
        return False

    def read_text(self, offset: int, limit: int) -> Text:
        """At most `limit` bytes from `offset` as text, whole characters only: a character
        split across two writes is held back until its rest comes (or the stream ends), so a
        reader going on from `next_offset` never gets it as two U+FFFD."""
        chunk = self.ring.read(offset, limit)
        data = chunk.data
        begin = cut_start(data)  # from the middle of a character (an offset, a ring overrun)
        final = self.eof and chunk.next_offset == self.ring.end
        end = len(data) if final else max(begin, whole_end(data))
        text = data[begin:end].decode("utf-8", errors="replace")
        return Text(text, chunk.next_offset - len(data) + end, chunk.skipped + begin)

    def end(self) -> None:
        """The stream ended (every writer closed it)."""
        self.eof = True
        if self.capture is not None:
            self.capture.add(b"", final=True)
        if self.log is not None:
            self.log.close()

    def flush_log(self) -> None:
        """Write what its log holds back."""
        if self.log is not None:
            self.log.flush()

    def keep_in(self, path: Path) -> None:
        """Start its log at `path`, with what the ring holds so far."""
        if self.log is None:
            self.log = OutputLog(path)
            self.log.write(self.ring.read(0, self.ring.capacity).data)
            if self.eof:
                self.log.close()
