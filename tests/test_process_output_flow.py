"""A relayed process output's flow control (ProcessOutput): held while more than HIGH_WATER
of it was not relayed, read again at LOW_WATER, so its ring never overruns the relay; one
without a relay is never held."""

from __future__ import annotations

from modules.sandbox.session.output_store import HIGH_WATER, LOW_WATER, RING_BYTES, ProcessOutput
from modules.sandbox.session.pump import READ_BYTES


def fill(output: ProcessOutput, size: int) -> list[bool]:
    """What `take` answered to each READ_BYTES read of `size` bytes."""
    return [output.take(b"x" * READ_BYTES) for _ in range(size // READ_BYTES)]


def test_a_relayed_output_is_held_above_the_high_water_mark_and_read_again_at_the_low() -> None:
    output = ProcessOutput()
    output.relayed = 0
    answers = fill(output, HIGH_WATER + READ_BYTES)
    assert answers == [True] * (HIGH_WATER // READ_BYTES) + [False]
    assert output.ring.end - output.ring.start == RING_BYTES  # nothing overran the relay yet
    assert output.ring.read(0, 1).skipped == 0
    sent = output.ring.end - LOW_WATER - 1
    assert output.relay_sent(sent) is False  # not yet at the low-water mark
    assert output.relay_sent(sent + 1) is True
    assert output.relay_sent(output.ring.end) is False  # once: it is no longer held
    assert output.take(b"y") is True


def test_an_output_without_a_relay_is_never_held_and_its_ring_overruns() -> None:
    output = ProcessOutput()
    assert all(fill(output, 2 * RING_BYTES))
    assert output.relay_sent(output.ring.end) is False
    assert output.ring.read(0, 1).skipped == RING_BYTES
