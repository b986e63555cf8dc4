"""A cancellation signal shared by the loop, the model stream and running tools."""

from __future__ import annotations

import threading
from collections.abc import Callable


class TaskCancelled(Exception):
    """Raised inside a task when the user stopped it."""


class CancelToken:
    """Set once by the front; everything running for the task watches it."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._callbacks: list[Callable[[], None]] = []

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def cancel(self) -> None:
        with self._lock:
            if self._event.is_set():
                return
            self._event.set()
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback()

    def on_cancel(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Run `callback` at cancel (now, if already cancelled); returns an unregister function."""
        with self._lock:
            if not self._event.is_set():
                self._callbacks.append(callback)
                return lambda: self._discard(callback)
        callback()
        return lambda: None

    def _discard(self, callback: Callable[[], None]) -> None:
        with self._lock:
            if callback in self._callbacks:
                self._callbacks.remove(callback)

    def raise_if_cancelled(self) -> None:
        if self._event.is_set():
            raise TaskCancelled()

    def wait(self, timeout: float) -> bool:
        """Sleep up to `timeout` seconds; True when cancelled meanwhile."""
        return self._event.wait(timeout)
