"""The one wait of the test kit: `wait_until` checks a condition until it holds.

Every wait allows `SLOWNESS` times its timeout (a loaded machine is slow, and a wait that passes
returns as soon as its condition holds): TEST_SLOWNESS sets it, never below 1; unset, it is 2,
for CI's loaded 2-core machine (a larger allowance costs a passing test nothing, only a failing
one waits longer to say so).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


SLOWNESS = max(1.0, float(os.environ.get("TEST_SLOWNESS", "2")))


def wait_until(
    condition: Callable[[], T | None],
    timeout: float = 10,
    what: str = "the condition",
    *,
    every: float = 0.02,
    woken_by: threading.Condition | None = None,
    details: Callable[[], str] | None = None,
) -> T:
    """Check `condition()` until it is truthy and return its value (so never None); fail with
    an AssertionError naming `what` (and `details()`) once `timeout` × SLOWNESS seconds have
    passed.

    Between checks it sleeps `every` seconds, or, with `woken_by`, waits on that condition
    variable (held while checking) at most that long, so a notified change is seen at once."""
    allowed = timeout * SLOWNESS
    deadline = time.monotonic() + allowed
    with woken_by if woken_by is not None else contextlib.nullcontext():
        while not (found := condition()):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                more = f"; {details()}" if details is not None else ""
                raise AssertionError(f"{what} did not happen within {allowed:g} s{more}")
            if woken_by is not None:
                woken_by.wait(min(every, remaining))
            else:
                time.sleep(min(every, remaining))
    return found
