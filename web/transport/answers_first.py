"""Answers before background work: a task begun by `send_message` runs once no `send_message`
is being handled, or after MAX_WAIT_SECONDS at most.

Under a burst of messages each handler shares the interpreter with the tasks the earlier ones
began (a task's start builds its prompt and writes its history: ~10 ms of CPU and ~100 system
calls, each one a turn given away): acknowledgements then wait behind all of that. Holding a
task's start until the handlers in flight have answered sends every acknowledgement first; the
tasks start right after, as they would have behind one another anyway.

It reaches no library's internals: web/handlers.py holds one and starts tasks through it.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

MAX_WAIT_SECONDS = 0.25  # a steady flow of messages never holds a task back longer

Start = Callable[..., Any]  # socketio.start_background_task


class AnswersFirst:
    """Counts the handlers answering; holds the tasks they begin until none is."""

    def __init__(self) -> None:
        self._answering = 0
        self._quiet = threading.Condition()

    @contextlib.contextmanager
    def answering(self) -> Iterator[None]:
        """Around a handler whose answer the tasks it begins should not hold up."""
        with self._quiet:
            self._answering += 1
        try:
            yield
        finally:
            with self._quiet:
                self._answering -= 1
                if not self._answering:
                    self._quiet.notify_all()

    def after_answers(self, start: Start) -> Start:
        """`start` (fn, *args), with fn run once no handler is answering."""

        def deferred(fn: Callable[..., Any], *args: Any) -> Any:
            def run() -> None:
                with self._quiet:
                    self._quiet.wait_for(lambda: not self._answering, MAX_WAIT_SECONDS)
                fn(*args)

            return start(run)

        return deferred
