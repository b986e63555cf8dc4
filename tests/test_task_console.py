"""The terminal's approval prompt: Ctrl-C at it declines the call and never stops the task, even
when it arrives while the question is still being written (a loaded machine shows the question
before the prompt reads)."""

from __future__ import annotations

import io
import threading

from cli.task_console import TaskConsole
from protocol.events import ToolEvent


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


class _InterruptedOnFlush(io.StringIO):
    """A screen whose first flush is where Ctrl-C lands."""

    def __init__(self) -> None:
        super().__init__()
        self.interrupted = False

    def flush(self) -> None:
        if not self.interrupted and "Allow?" in self.getvalue():
            self.interrupted = True
            raise KeyboardInterrupt


class _Console(TaskConsole):
    def __init__(self, err: io.StringIO) -> None:
        self.open_console(io.StringIO(), err, _Tty(), json_mode=False, one_shot=False)
        self.answers: list[bool] = []
        self.stopped = False
        self.answered = threading.Event()

    def read_answer(self, request: ToolEvent) -> str | None:
        raise AssertionError("the prompt is read after Ctrl-C landed")

    def give_answer(self, request: ToolEvent, approved: bool, *, always: bool = False) -> None:
        self.answers.append(approved)
        self.answered.set()


def test_ctrl_c_while_the_question_is_written_declines_the_call_and_the_task_goes_on():
    screen = _InterruptedOnFlush()
    console = _Console(screen)
    request = ToolEvent(call_id="c1", tool="modify_file", phase="approval", arguments={})

    def work() -> None:
        console.print_event(request)
        assert console.answered.wait(30)

    def stop() -> None:
        console.stopped = True

    console.run_asking(work, "task", stop)
    assert console.answers == [False]
    assert not console.stopped
    assert console.declined == ["you declined modify_file"]
    assert "declined: modify_file does not run." in screen.getvalue()
