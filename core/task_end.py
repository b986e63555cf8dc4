"""How a task ends: the reason its run came to (a failure told as an `Error` event first), and
that end kept with the conversation before its `done` goes out."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from core.budgets import BudgetReached
from core.repeats import RepeatLoop
from core.task import Task
from history.conversation import Conversation
from model.errors import ApiError
from protocol.events import Done, DoneReason, Error
from utils.cancel import TaskCancelled
from utils.disk import disk_full, is_disk_full

log = logging.getLogger(__name__)
SERVER_STOPPED = (
    "The server was stopped (shut down or restarted) while this task ran: it was not your "
    "Stop. What it recorded is kept; send a message to go on."
)
TASK_CUT = "The task stopped there; what it recorded before is kept."


def run_to_end(run: Callable[[Task], DoneReason], task: Task, data_dir: Path) -> DoneReason:
    """Run `task` with `run` and say how it ended; what stopped it is reported as an `Error`
    (a crash too: it is logged, and the task ends as `error`)."""
    try:
        return run(task)
    except TaskCancelled:
        if task.cancel.reason != "shutdown":
            return "cancelled"
        task.report(Error("interrupted", SERVER_STOPPED))
        return "interrupted"
    except ApiError as exc:
        task.report(Error(exc.code, str(exc)))
        return "error"
    except RepeatLoop as exc:
        task.report(Error(exc.code, str(exc)))
        return "loop"
    except BudgetReached as exc:
        task.budget_reached = exc.details()
        task.report(Error("budget_reached", str(exc)))
        return "budget"
    except Exception as exc:
        if is_disk_full(exc):
            log.warning("a task's write found the disk full", exc_info=True)
            task.report(Error("disk_full", str(disk_full(data_dir, TASK_CUT))))
            return "error"
        log.exception("task crashed")
        task.report(Error("internal_error", f"{type(exc).__name__}: {exc}"))
        return "error"


def keep_task_end(
    conversation: Conversation, message_id: str, done: Done, focus: list[str], seq: int
) -> None:
    """Store the end of the task of `message_id` in meta.json (`task_ends`), with the focus
    files and the seq of its `done`. A failure is logged: the `done` goes out all the same,
    so no client waits for ever."""
    try:
        ends = dict(conversation.current_meta().get("meta", {}).get("task_ends") or {})
        ends[message_id] = {"reason": done.reason, "usage": done.usage_wire()}
        if done.budget is not None:
            ends[message_id]["budget"] = done.budget
        conversation.update_meta(task_ends=ends, focus=focus, last_seq=seq)
    except OSError:
        log.exception("could not store a task's end")
