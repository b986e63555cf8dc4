"""Which calls wait for the user, and the wait itself."""

from __future__ import annotations

import threading
from typing import Any

from modules.file_manager import EDIT_LIMIT_BYTES, read_text
from modules.paths import Workspace
from modules.proposals import unified_diff
from modules.results import ToolError
from utils.cancel import CancelToken
from utils.settings import Approval
from utils.text import cap_text

ASKING_TOOLS = frozenset({"run_command", "run_python", "delete_file", "rename_file"})
OVERWRITING_TOOLS = frozenset({"create_file", "modify_file"})
PREVIEW_LIMIT_CHARS = 20_000


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


def preview(tool: str, arguments: dict[str, Any], workspace: Workspace) -> str:
    """What the user is shown before approving: the command or code, a diff, else the arguments."""
    command = arguments.get("command") or arguments.get("code")
    if command:
        return str(command)
    diff = _write_diff(tool, arguments, workspace)
    if diff is not None:
        return cap_text(diff, PREVIEW_LIMIT_CHARS)
    return "\n".join(f"{key}: {value}" for key, value in arguments.items())


def _write_diff(tool: str, arguments: dict[str, Any], workspace: Workspace) -> str | None:
    """The unified diff a create_file or modify_file call would make; None when unknown."""
    if tool not in OVERWRITING_TOOLS:
        return None
    try:
        target = workspace.resolve(arguments["path"])
        rel = workspace.relative(target)
        old = read_text(target, rel, EDIT_LIMIT_BYTES, strict=True) if target.exists() else None
    except (ToolError, KeyError, OSError):
        return None
    new = _written_text(tool, arguments, old)
    if new is None:
        return None
    return unified_diff(old, new, rel) or f"(no change to {rel})"


def _written_text(tool: str, arguments: dict[str, Any], old: str | None) -> str | None:
    if tool == "create_file":
        return str(arguments.get("content") or "")
    if old is None:
        return None
    operation = arguments.get("operation")
    if operation == "clear":
        return ""
    if operation == "append":
        return old + str(arguments.get("content") or "")
    old_text, new_text = arguments.get("old_text"), arguments.get("new_text")
    if operation != "replace" or not old_text or new_text is None or old.count(old_text) != 1:
        return None
    return old.replace(old_text, new_text, 1)
