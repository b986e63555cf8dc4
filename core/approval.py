"""Which calls wait for the user, what they are shown, and the wait itself."""

from __future__ import annotations

import threading
from typing import Any

from modules.paths import Workspace
from modules.registry import Tool
from modules.results import PlannedWrite, ToolError
from modules.text_files import unified_diff
from utils.cancel import CancelToken
from utils.settings import Approval
from utils.text import cap_text

PREVIEW_LIMIT_CHARS = 20_000


class ApprovalGate:
    """Holds the calls waiting for an answer; one per conversation."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiting: dict[str, tuple[str, threading.Event]] = {}
        self._answers: dict[str, bool] = {}
        self.always_allowed: set[str] = set()

    def needs_approval(self, mode: Approval, tool: Tool, plan: PlannedWrite | None) -> bool:
        """Whether this call waits for the user, by the policy its tool was registered with."""
        if mode != "ask" or tool.name in self.always_allowed:
            return False
        if tool.asks == "on_overwrite":
            return plan is not None and plan.overwrites
        return tool.asks == "always"

    def open(self, call_id: str, tool: str) -> None:
        """Register the call before the approval event goes out, so no answer is missed."""
        with self._lock:
            self._waiting[call_id] = (tool, threading.Event())

    def wait(self, call_id: str, cancel: CancelToken) -> bool:
        """Block until `answer` or cancel; True when approved."""
        with self._lock:
            _, event = self._waiting[call_id]
        unregister = cancel.on_cancel(event.set)
        try:
            event.wait()
        finally:
            unregister()
            with self._lock:
                self._waiting.pop(call_id, None)
        cancel.raise_if_cancelled()
        with self._lock:
            return self._answers.pop(call_id, False)

    def answer(self, call_id: str, approved: bool, *, always: bool = False) -> bool:
        """Deliver the user's answer; False when no such call is waiting."""
        with self._lock:
            waiting = self._waiting.get(call_id)
            if waiting is None:
                return False
            tool, event = waiting
            self._answers[call_id] = approved
            if approved and always:
                self.always_allowed.add(tool)
        event.set()
        return True


def planned_write(tool: Tool, args: Any, workspace: Workspace) -> PlannedWrite | None:
    """What a writing call would change; None for other tools and for calls that will fail."""
    if tool.plan is None:
        return None
    try:
        return tool.plan(workspace, args)
    except (ToolError, OSError):
        return None


def preview(arguments: dict[str, Any], plan: PlannedWrite | None) -> str:
    """What the user is shown before approving: the command or code, a diff, else the arguments."""
    command = arguments.get("command") or arguments.get("code")
    if command:
        return str(command)
    if plan is not None:
        if plan.existed and plan.old is None:
            return f"(replaces {plan.rel}, which is binary or too large to show)"
        diff = unified_diff(plan.old, plan.new, plan.rel) or f"(no change to {plan.rel})"
        return cap_text(diff, PREVIEW_LIMIT_CHARS)
    return "\n".join(f"{key}: {value}" for key, value in arguments.items())
