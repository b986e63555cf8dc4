"""An asyncio event loop on its own OS thread, called from ordinary or green threads.

Asyncio SDKs (MCP, A2A) run here. Under eventlet the loop thread is a real OS thread (the
original `threading`, not the patched one) and a green caller waits by polling with short
green sleeps, so neither side ever blocks the other's scheduler; results cross between
threads only through a real `threading.Event` and plain attributes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import threading
import time
from collections.abc import Coroutine
from typing import Any, Generic, TypeVar

from utils.cancel import CancelToken, TaskCancelled

T = TypeVar("T")
GREEN_POLL_SECONDS = 0.005
GREEN_POLL_MAX_SECONDS = 0.05


def green_threads() -> bool:
    """Whether eventlet has patched `threading` in this process (checked, never imported)."""
    patcher = sys.modules.get("eventlet.patcher")
    return patcher is not None and bool(patcher.is_monkey_patched("thread"))


def _os_threading() -> Any:
    """The `threading` module of real OS threads, even under eventlet's monkey patching."""
    if green_threads():
        return sys.modules["eventlet.patcher"].original("threading")
    return threading


def wait_real_event(event: Any, timeout: float | None) -> bool:
    """Wait for a `threading.Event` that an OS thread sets; True when set. A green thread
    polls it with green sleeps rather than blocking its whole hub."""
    if not green_threads():
        return bool(event.wait(timeout))
    deadline = None if timeout is None else time.monotonic() + timeout
    pause = GREEN_POLL_SECONDS
    while not event.is_set():
        if deadline is not None and time.monotonic() >= deadline:
            return False
        time.sleep(pause)  # a green sleep: other green threads run meanwhile
        pause = min(pause * 2, GREEN_POLL_MAX_SECONDS)
    return True


class Pending(Generic[T]):
    """A coroutine submitted to a LoopThread: wait for it, or cancel it, from any thread."""

    def __init__(self, loop: asyncio.AbstractEventLoop, done: Any) -> None:
        self._loop = loop
        self._done = done  # a real threading.Event
        self._task: asyncio.Task[Any] | None = None
        self._value: Any = None
        self._error: BaseException | None = None
        self._abandoned = False

    @property
    def done(self) -> bool:
        return bool(self._done.is_set())

    async def _run(self, coro: Coroutine[Any, Any, T]) -> None:
        self._task = asyncio.current_task()
        try:
            self._value = await coro
        except asyncio.CancelledError:
            self._error = TaskCancelled()
        except BaseException as exc:  # handed to the waiting thread as it is
            self._error = exc
        finally:
            self._done.set()

    def cancel(self) -> None:
        """Cancel the coroutine on its loop (safe from any thread); waiters return at once."""
        self._abandoned = True
        self._done.set()
        with contextlib.suppress(RuntimeError):  # the loop already stopped
            self._loop.call_soon_threadsafe(self._cancel_task)

    def _cancel_task(self) -> None:
        if self._task is not None:
            self._task.cancel()

    def wait(self, timeout: float | None = None, cancel: CancelToken | None = None) -> T:
        """The coroutine's result; TimeoutError past `timeout` (the coroutine is cancelled),
        TaskCancelled when `cancel` fires first, else whatever it raised."""
        unregister = cancel.on_cancel(self.cancel) if cancel is not None else (lambda: None)
        try:
            finished = self._wait_done(timeout)
        finally:
            unregister()
        if not finished:
            self.cancel()
            raise TimeoutError(f"no answer within {timeout:g} s")
        if self._abandoned:
            raise TaskCancelled()
        if self._error is not None:
            raise self._error
        return self._value

    def _wait_done(self, timeout: float | None) -> bool:
        return wait_real_event(self._done, timeout)


def _real_log_locks() -> None:
    """Under eventlet, give the log handlers real OS locks.

    A loop thread logs (the SDKs, uvicorn, our own code) through the same handlers as the
    green threads. An OS thread that finds a green lock held waits forever (nothing in its
    own hub wakes it); a real lock, held only while a record is written, never yields and is
    safe on both sides.
    """
    real = sys.modules["eventlet.patcher"].original("threading")
    for handler in logging.getLogger().handlers:
        if not isinstance(handler.lock, type(real.RLock())):
            handler.lock = real.RLock()


class LoopThread:
    """One asyncio loop running forever on a daemon OS thread of its own."""

    def __init__(self, name: str = "asyncio-loop") -> None:
        if green_threads():
            _real_log_locks()
        self._threading = _os_threading()
        self._loop = asyncio.new_event_loop()
        self._thread = self._threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_forever()
        finally:
            self._loop.close()

    @property
    def running(self) -> bool:
        return bool(self._thread.is_alive())

    def submit(self, coro: Coroutine[Any, Any, T]) -> Pending[T]:
        """Start `coro` on the loop; RuntimeError once the loop has stopped."""
        pending: Pending[T] = Pending(self._loop, self._threading.Event())
        try:
            self._loop.call_soon_threadsafe(self._loop.create_task, pending._run(coro))
        except RuntimeError:
            coro.close()
            raise RuntimeError("the asyncio loop thread has stopped") from None
        return pending

    def run(
        self,
        coro: Coroutine[Any, Any, T],
        *,
        timeout: float | None = None,
        cancel: CancelToken | None = None,
    ) -> T:
        """Run `coro` on the loop and wait for its result (see Pending.wait)."""
        return self.submit(coro).wait(timeout, cancel)

    def stop(self, timeout: float = 5.0) -> None:
        """Cancel what still runs on the loop, then stop it and wait for its thread."""
        if not self._thread.is_alive():
            return

        async def cancel_all() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            if tasks:
                await asyncio.wait(tasks, timeout=timeout)
            self._loop.stop()

        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(self._loop.create_task, cancel_all())
        deadline = time.monotonic() + timeout + 1.0
        while self._thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.01)
