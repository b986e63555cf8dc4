"""web.transport.answers_first: a task begun while a send_message is answered runs after the
answer."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from web.transport import answers_first
from web.transport.answers_first import AnswersFirst


def _thread_start(fn: Callable[..., Any], *args: Any) -> threading.Thread:
    thread = threading.Thread(target=fn, args=args, daemon=True)
    thread.start()
    return thread


def test_a_task_begun_while_answering_runs_once_every_handler_has_answered() -> None:
    answers = AnswersFirst()
    start = answers.after_answers(_thread_start)
    order: list[str] = []
    with answers.answering():
        with answers.answering():  # a second handler in flight
            worker = start(order.append, "task")
            order.append("answer 1")
        worker.join(0.1)  # the other handler still answers: the task waits
        assert order == ["answer 1"]
        order.append("answer 2")
    worker.join(5)
    assert order == ["answer 1", "answer 2", "task"]


def test_a_task_is_held_back_no_longer_than_the_bound(monkeypatch: Any) -> None:
    monkeypatch.setattr(answers_first, "MAX_WAIT_SECONDS", 0.2)
    answers = AnswersFirst()
    ran = threading.Event()
    with answers.answering():  # a handler that never finishes within the bound
        began = time.monotonic()
        answers.after_answers(_thread_start)(ran.set)
        assert ran.wait(5)
        assert time.monotonic() - began >= 0.2


def test_a_task_begun_with_nothing_in_flight_starts_at_once(monkeypatch: Any) -> None:
    monkeypatch.setattr(answers_first, "MAX_WAIT_SECONDS", 60.0)  # waiting it out would show
    answers = AnswersFirst()
    ran = threading.Event()
    answers.after_answers(_thread_start)(ran.set)
    assert ran.wait(10)
