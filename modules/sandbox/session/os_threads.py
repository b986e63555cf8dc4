"""The sessions' own threads are OS threads with the standard modules as they are, even under
eventlet's monkey patching (which makes `threading`, `socket`, `select` and `os.read` green):
the output pump and the control channels' readers block in real system calls, and a green
caller (a tool under eventlet) waits for them by polling with green sleeps
(utils.async_loop.wait_real_event). Their locks are real locks, held only briefly."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

from utils.async_loop import green_threads

GREEN_POLL_SECONDS = 0.005
GREEN_POLL_MAX_SECONDS = 0.05


def original(name: str) -> ModuleType:
    """The standard module `name` without eventlet's patches."""
    if green_threads():
        module: ModuleType = sys.modules["eventlet.patcher"].original(name)
        return module
    return __import__(name)


def start_thread(target: Callable[[], None], name: str) -> Any:
    """Start `target` on a daemon OS thread; the thread."""
    thread = original("threading").Thread(target=target, name=name, daemon=True)
    thread.start()
    return thread


def new_condition() -> Any:
    """A condition variable that OS threads notify and any thread waits on (wait_for)."""
    return original("threading").Condition()


def wait_for(condition: Any, predicate: Callable[[], bool], timeout: float | None) -> bool:
    """Wait until `predicate()` (checked holding `condition`) or `timeout`; its last value.
    An OS thread sleeps on the condition; a green one polls it, so its hub keeps running."""
    if not green_threads():
        with condition:
            return bool(condition.wait_for(predicate, timeout))
    deadline = None if timeout is None else time.monotonic() + timeout
    pause = GREEN_POLL_SECONDS
    while True:
        with condition:
            if predicate():
                return True
        if deadline is not None and time.monotonic() >= deadline:
            return False
        time.sleep(pause if deadline is None else min(pause, max(0.0, deadline - time.monotonic())))
        pause = min(pause * 2, GREEN_POLL_MAX_SECONDS)
