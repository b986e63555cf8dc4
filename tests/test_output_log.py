"""A process's log file (DATA_DIR/processes/CID/ID.log and ID.log.1): what a flood writes
between two flushes reaches the disk once, only its last two files' worth; a quiet process's
output is on disk by the next flush; the end writes the rest."""

from __future__ import annotations

import time
from pathlib import Path

from modules.sandbox.session.output_store import LOG_FLUSH_SECONDS, OutputLog

CAP = 1000


def on_disk(path: Path) -> bytes:
    older = path.with_name(path.name + ".1")
    return (older.read_bytes() if older.exists() else b"") + path.read_bytes()


def test_the_first_write_is_on_disk_at_once_and_later_ones_by_the_next_flush(
    tmp_path: Path,
) -> None:
    log = OutputLog(tmp_path / "p1.log", CAP)
    log.write(b"ready\n")
    assert on_disk(log.path) == b"ready\n"
    log.write(b"got hello\n")
    assert on_disk(log.path) == b"ready\n", "within LOG_FLUSH_SECONDS it waits"
    log.flush()
    assert on_disk(log.path) == b"ready\ngot hello\n"
    time.sleep(LOG_FLUSH_SECONDS)
    log.write(b"later\n")
    assert on_disk(log.path) == b"ready\ngot hello\nlater\n"
    log.write(b"last\n")
    log.close()
    assert on_disk(log.path) == b"ready\ngot hello\nlater\nlast\n"


def test_a_flood_between_flushes_keeps_exactly_its_last_two_files_worth(tmp_path: Path) -> None:
    log = OutputLog(tmp_path / "p1.log", CAP)
    log.write(b"a" * 300)  # on disk at once
    flood = bytes(range(256)) * 40  # 10,240 bytes, far more than two files hold
    for at in range(0, len(flood), 64):
        log.write(flood[at : at + 64])
    log.flush()
    kept = on_disk(log.path)
    assert log.path.stat().st_size <= CAP and log.path.with_name("p1.log.1").stat().st_size == CAP
    assert CAP < len(kept) <= 2 * CAP
    assert kept == (b"a" * 300 + flood)[-len(kept) :], "the newest bytes, in order"


def test_a_log_that_cannot_be_written_ends_and_says_why(tmp_path: Path) -> None:
    folder = tmp_path / "gone"
    log = OutputLog(folder / "p1.log", CAP)
    assert log.error is not None and "No such file" in log.error
    log.write(b"nothing\n")
    log.flush()
    log.close()
    assert not folder.exists()
