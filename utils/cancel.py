"""A cancellation signal shared by the loop, the model stream and running tools."""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Callable
from typing import Any, Literal, TypeVar

T = TypeVar("T")
CancelReason = Literal["user", "shutdown"]  # the user's Stop, or the server stopping


class TaskCancelled(Exception):
    """Raised inside a task when it was stopped (the token's `reason` says why)."""


class CancelToken:
    """Set once by the front; everything running for the task watches it."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._callbacks: list[Callable[[], object]] = []
        self.reason: CancelReason | None = None  # the first cancel's

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def cancel(self, reason: CancelReason = "user") -> None:
        with self._lock:
            if self._event.is_set():
                return
            self.reason = reason
            self._event.set()
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback()

    def on_cancel(self, callback: Callable[[], object]) -> Callable[[], None]:
        """Run `callback` at cancel (now, if already cancelled; what it returns is dropped);
        returns an unregister function."""
        with self._lock:
            if not self._event.is_set():
                self._callbacks.append(callback)
                return lambda: self._discard(callback)
        callback()
        return lambda: None

    def _discard(self, callback: Callable[[], object]) -> None:
        with self._lock:
            if callback in self._callbacks:
                self._callbacks.remove(callback)

    def raise_if_cancelled(self) -> None:
        if self._event.is_set():
            raise TaskCancelled()

    def wait(self, timeout: float) -> bool:
        """Sleep up to `timeout` seconds; True when cancelled meanwhile."""
        return self._event.wait(timeout)


def run_bounded(
    function: Callable[[], T], cancel: CancelToken, limit: float, *, grace: float = 1.0
) -> T:
    """Run `function` in a worker thread and wait for it, but no longer than `limit` seconds
    (TimeoutError) nor `grace` seconds past a cancel (TaskCancelled). A worker given up on
    finishes unobserved: whatever it still returns or raises is dropped."""
    outcome: dict[str, Any] = {}
    done, wake = threading.Event(), threading.Event()

    def work() -> None:
        try:
            outcome["value"] = function()
        except BaseException as exc:  # handed to the waiting thread as it is
            outcome["error"] = exc
        finally:
            done.set()
            wake.set()

    context = contextvars.copy_context()  # the caller's log context goes along
    threading.Thread(target=context.run, args=(work,), name="bounded-call", daemon=True).start()
    unregister = cancel.on_cancel(wake.set)
    deadline = time.monotonic() + limit
    try:
        while not done.is_set():
            if cancel.cancelled:
                if not done.wait(grace):
                    raise TaskCancelled()
                break
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no answer within {limit:g} s")
            wake.wait(left)
    finally:
        unregister()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]
