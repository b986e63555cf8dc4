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
import weakref
from collections.abc import Coroutine
from inspect import CORO_CREATED, getcoroutinestate, iscoroutine
from typing import Any, Generic, TypeVar

from utils.cancel import CancelToken, TaskCancelled

T = TypeVar("T")
GREEN_POLL_SECONDS = 0.005
GREEN_POLL_MAX_SECONDS = 0.05
END_POLL_SECONDS = 0.05


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


def real_log_locks() -> None:
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


def _unstarted(task: asyncio.Task[Any]) -> bool:
    coro = task.get_coro()
    return iscoroutine(coro) and getcoroutinestate(coro) == CORO_CREATED


class LoopThread:
    """One asyncio loop running forever on a daemon OS thread of its own."""

    def __init__(self, name: str = "asyncio-loop") -> None:
        if green_threads():
            real_log_locks()
        self._threading = _os_threading()
        self._loop = asyncio.new_event_loop()
        self._stop_timeout = 5.0
        self._roots: weakref.WeakSet[asyncio.Task[Any]] = weakref.WeakSet()  # submitted ones
        self._thread = self._threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_forever()
            # Every task gets to run until it ends: one created and never stepped (an SDK's
            # task group starting a child as it is cancelled) would be reported at exit as a
            # coroutine never awaited, and its cleanup (a child process's wait) never done.
            self._loop.run_until_complete(self._end_tasks())
            self._loop.run_until_complete(self._loop.shutdown_asyncgens())
        finally:
            self._loop.close()

    async def _end_tasks(self) -> None:
        """End what runs on the loop, within the stop's time: the submitted coroutines are
        cancelled first, and only once they ended whatever they left behind. Each task is
        cancelled once, after its first step: a task cancelled before it never runs the
        coroutine it wraps (anyio's children; reported at exit as never awaited), and
        cancelling a task again defeats the shield an SDK puts around its cleanup (a stdio
        server's child process being stopped and reaped)."""
        deadline = time.monotonic() + self._stop_timeout
        cancelled: set[asyncio.Task[Any]] = set()
        while (left := deadline - time.monotonic()) > 0:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            if not tasks:
                return
            roots_running = any(task in self._roots for task in tasks)
            for task in tasks:
                if task in cancelled or _unstarted(task):
                    continue
                if roots_running and task not in self._roots:
                    continue
                task.cancel()
                cancelled.add(task)
            await asyncio.wait(
                tasks, timeout=min(END_POLL_SECONDS, left), return_when="FIRST_COMPLETED"
            )

    @property
    def running(self) -> bool:
        return bool(self._thread.is_alive())

    def submit(self, coro: Coroutine[Any, Any, T]) -> Pending[T]:
        """Start `coro` on the loop; RuntimeError once the loop has stopped."""
        pending: Pending[T] = Pending(self._loop, self._threading.Event())
        runner = pending._run(coro)
        try:
            self._loop.call_soon_threadsafe(self._start, runner)
        except RuntimeError:
            runner.close()
            coro.close()
            raise RuntimeError("the asyncio loop thread has stopped") from None
        return pending

    def _start(self, runner: Coroutine[Any, Any, None]) -> None:
        self._roots.add(self._loop.create_task(runner))

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
        """Stop the loop, cancel what still runs on it (within `timeout`), and wait for its
        thread."""
        if not self._thread.is_alive():
            return
        self._stop_timeout = timeout
        with contextlib.suppress(RuntimeError):  # already closed
            self._loop.call_soon_threadsafe(self._loop.stop)
        deadline = time.monotonic() + timeout + 1.0
        while self._thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.01)
