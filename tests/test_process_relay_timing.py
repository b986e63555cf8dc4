"""When the process relay (core/process_relay.py) sends a process's output it was told of: a
part of a batch waits BATCH_SECONDS for more to gather with, a full batch goes at once. The
relay's thread is not started: each test asks it how long it would wait now."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.process_relay import BATCH_BYTES, BATCH_SECONDS, ProcessRelay
from modules.sandbox.factory import runner_for, sessions_of
from modules.sandbox.session.process import ProcessEvent
from tests.kit.tools import make_ctx

CID = "c" * 32


@pytest.fixture
def relay(tmp_path: Path) -> Iterator[ProcessRelay]:
    """A relay listening to a local runner's sessions, as the server builds them."""
    runner = runner_for(make_ctx(tmp_path, sandbox="local").settings)
    pool = sessions_of(runner)
    if pool is None:
        pytest.skip("bubblewrap is not installed or cannot create a sandbox here")
    try:
        yield ProcessRelay(pool, lambda cid, event: None, lambda cid: True, lambda run: None,
                           time.sleep)  # fmt: skip
    finally:
        runner.close()


def told(relay: ProcessRelay, output_end: int) -> None:
    relay.on_event(ProcessEvent(CID, "p1", "output", offset=output_end))


def test_part_of_a_batch_waits_to_gather_more(relay: ProcessRelay) -> None:
    told(relay, 100)
    assert relay._pause(quiet=0.01) == pytest.approx(BATCH_SECONDS - 0.01)
    told(relay, BATCH_BYTES - 1)
    assert relay._pause(quiet=0.01) > 0


def test_a_full_batch_goes_at_once(relay: ProcessRelay) -> None:
    told(relay, 100)
    told(relay, BATCH_BYTES)
    assert relay._pause(quiet=0.0) == 0.0
