"""A session process's output ring (OutputRing, written over in place once full) against the
plain model of what it keeps: the last `capacity` bytes, read from any offset; and the pipe
the output pump reads, made large enough that a flood's writer runs ahead of its reads."""

from __future__ import annotations

import fcntl
import os
import random

import pytest

from modules.sandbox.session.output_store import Chunk, OutputRing
from modules.sandbox.session.pump import PIPE_BYTES, OutputPump


class Kept:
    """The model: every byte written, the ring's last `capacity` of them."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.data = b""
        self.end = 0

    def append(self, data: bytes) -> None:
        self.data = (self.data + data)[-self.capacity :]
        self.end += len(data)

    def read(self, offset: int, limit: int) -> Chunk:
        offset = max(0, min(offset, self.end))
        start = self.end - len(self.data)
        skipped = max(0, start - offset)
        begin = offset + skipped - start
        data = self.data[begin : begin + limit]
        return Chunk(data, offset + skipped + len(data), skipped)


@pytest.mark.parametrize("capacity", [1, 3, 16, 1000])
def test_the_ring_keeps_the_last_bytes_whatever_the_writes_and_reads(capacity: int) -> None:
    rng = random.Random(capacity)
    ring, kept = OutputRing(capacity), Kept(capacity)
    sizes = [0, 1, 2, capacity - 1, capacity, capacity + 1, 2 * capacity + 3]
    for _ in range(2000):
        size = rng.choice([*sizes, rng.randint(0, 3 * capacity)])
        data = rng.randbytes(max(0, size))
        ring.append(data)
        kept.append(data)
        assert (ring.start, ring.end) == (kept.end - len(kept.data), kept.end)
        for _ in range(3):
            offset, limit = rng.randint(-2, ring.end + 2), rng.randint(0, 2 * capacity + 2)
            assert ring.read(offset, limit) == kept.read(offset, limit), (offset, limit)


def test_a_read_across_the_rings_end_comes_in_order() -> None:
    ring = OutputRing(10)
    ring.append(b"0123456789")
    ring.append(b"abcd")  # over 0123: held "456789abcd", its "ab" at the ring's start
    assert ring.read(0, 100) == Chunk(b"456789abcd", 14, 4)
    assert ring.read(8, 4) == Chunk(b"89ab", 12, 0)


def test_the_pump_widens_the_pipe_it_reads() -> None:
    read_end, write_end = os.pipe()
    pump = OutputPump()

    class Ignore:
        rate = None

        def take(self, data: bytes) -> bool:
            return True

        def ended(self) -> None:
            pass

    try:
        pump.add(read_end, Ignore())
        assert fcntl.fcntl(write_end, fcntl.F_GETPIPE_SZ) == PIPE_BYTES
    finally:
        os.close(write_end)  # the pump sees its end and closes the read end itself
