"""A background process's output read as text: whole characters only, so a UTF-8 character
written in two pieces reaches a reader whole, however the reads fall."""

from __future__ import annotations

from modules.sandbox.session.output_store import OutputRing, ProcessOutput, whole_end

EURO = "€".encode()  # three bytes: e2 82 ac


def test_a_character_cut_by_the_end_of_what_was_written_waits_for_its_rest() -> None:
    output = ProcessOutput()
    output.take(b"price " + EURO[:2])
    first = output.read_text(0, 1024)
    assert first.text == "price " and first.next_offset == 6 and first.skipped == 0
    output.take(EURO[2:] + b"5\n")
    second = output.read_text(first.next_offset, 1024)
    assert second.text == "€5\n" and second.next_offset == 11


def test_a_character_cut_by_the_read_limit_comes_whole_in_the_next_read() -> None:
    output = ProcessOutput()
    output.take(b"ab" + EURO + b"cd")
    first = output.read_text(0, 3)
    assert (first.text, first.next_offset) == ("ab", 2)
    second = output.read_text(first.next_offset, 3)
    assert (second.text, second.next_offset) == ("€", 5)


def test_the_cut_end_of_an_ended_stream_is_given_as_it_is() -> None:
    output = ProcessOutput()
    output.take(b"end" + EURO[:2])
    output.end()
    read = output.read_text(0, 1024)
    assert read.text == "end\ufffd" and read.next_offset == 5


def test_a_read_from_the_middle_of_a_character_starts_at_the_next_one() -> None:
    output = ProcessOutput()
    output.take(EURO + b"x")
    read = output.read_text(1, 1024)
    assert read.text == "x" and read.skipped == 2 and read.next_offset == 4


def test_a_ring_overrun_that_cut_a_character_counts_its_rest_as_skipped() -> None:
    output = ProcessOutput()
    output.ring = OutputRing(capacity=4)
    output.take(b"a" + EURO + b"b")  # it keeps the last 4 bytes
    held = output.ring.read(0, 10)
    assert held.skipped == 1 and held.data == EURO + b"b"
    output.take(b"c")  # now it holds 82 ac 62 63: the euro's lead byte is gone
    read = output.read_text(0, 10)
    assert read.text == "bc" and read.skipped == 4 and read.next_offset == 6


def test_whole_end_keeps_whole_characters_and_bytes_nothing_can_complete() -> None:
    assert whole_end(b"") == 0
    assert whole_end(b"a") == 1
    assert whole_end(EURO) == 3
    assert whole_end(EURO[:1]) == 0
    assert whole_end(b"x" + EURO[:2]) == 1
    assert whole_end("😀".encode()[:3]) == 0  # a four-byte character, one byte short
    assert whole_end(b"\x82\x82\x82\x82") == 4  # continuation bytes with no lead
    assert whole_end(b"\xff") == 1  # never a lead byte
