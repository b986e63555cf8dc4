"""The sessions' own threads are OS threads with the standard modules as they are, even under
eventlet's monkey patching (which makes `threading`, `socket`, `select` and `os.read` green):
the output pump and the control channels' readers block in real system calls, and a green
caller (a tool under eventlet) waits for them by polling with green sleeps. Their locks are
real locks, held only briefly."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

from utils.async_loop import green_threads, real_log_locks

GREEN_POLL_SECONDS = 0.005
GREEN_POLL_MAX_SECONDS = 0.05


def original(name: str) -> ModuleType:
    """The standard module `name` without eventlet's patches."""
    if green_threads():
        module: ModuleType = sys.modules["eventlet.patcher"].original(name)
        return module
    return __import__(name)


_ours: Any = None  # a real threading.local: set on the threads start_thread started


def start_thread(target: Callable[[], None], name: str) -> Any:
    """Start `target` on a daemon OS thread; the thread."""
    global _ours
    threading = original("threading")
    if _ours is None:
        _ours = threading.local()
        if green_threads():
            real_log_locks()  # an OS thread waiting on a green lock would never wake

    def run() -> None:
        _ours.real = True
        target()

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    return thread


def new_condition() -> Any:
    """A condition variable that OS threads notify and any thread waits on (wait_for)."""
    return original("threading").Condition()


def sleep(seconds: float) -> None:
    """A real sleep on an OS thread, a green one on a green thread."""
    if _on_green_thread():
        time.sleep(seconds)
    else:
        original("time").sleep(seconds)


def wait_for(condition: Any, predicate: Callable[[], bool], timeout: float | None) -> bool:
    """Wait until `predicate()` (checked holding `condition`) or `timeout`; its last value.
    An OS thread sleeps on the condition; a green one polls it, so its hub keeps running."""
    if not _on_green_thread():
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


def _on_green_thread() -> bool:
    return green_threads() and not (_ours is not None and getattr(_ours, "real", False))
