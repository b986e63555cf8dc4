"""Which calls wait for the user, and the wait itself."""

from __future__ import annotations

import threading
from typing import Any

from core.cancel import CancelToken
from modules.paths import Workspace
from modules.registry import ToolError
from utils.settings import Approval

ASKING_TOOLS = frozenset({"run_command", "run_python", "delete_file", "rename_file"})
OVERWRITING_TOOLS = frozenset({"create_file", "modify_file"})


class ApprovalGate:
    """Holds the calls waiting for an answer; one per conversation."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiting: dict[str, tuple[str, threading.Event]] = {}
        self._answers: dict[str, bool] = {}
        self.always_allowed: set[str] = set()

    def needs_approval(
        self, mode: Approval, tool: str, arguments: dict[str, Any], workspace: Workspace
    ) -> bool:
        if mode != "ask" or tool in self.always_allowed:
            return False
        if tool in ASKING_TOOLS:
            return True
        return tool in OVERWRITING_TOOLS and _overwrites(tool, arguments, workspace)

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



def _overwrites(tool: str, arguments: dict[str, Any], workspace: Workspace) -> bool:
    """Whether the call replaces content that exists now."""
    if tool == "modify_file":
        return arguments.get("operation") != "append"
    try:
        return workspace.resolve(arguments["path"]).exists()
    except ToolError:
        return False


def preview(arguments: dict[str, Any]) -> str:
    """What the user is shown before approving: the command or code, else the arguments."""
    command = arguments.get("command") or arguments.get("code")
    if command:
        return str(command)
    return "\n".join(f"{key}: {value}" for key, value in arguments.items())
