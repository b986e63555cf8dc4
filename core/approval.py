"""Which calls wait for the user, what they are shown, and the wait itself."""

from __future__ import annotations

import re
import threading
from collections import Counter
from typing import Any

from modules.paths import Workspace
from modules.registry import Tool
from modules.results import PlannedWrite, ToolError
from modules.text_files import unified_diff
from utils.cancel import CancelToken
from utils.settings import Approval
from utils.text import cap_text

PREVIEW_LIMIT_CHARS = 20_000
BLANK_LINES_WARNED = 3
LONG_PREVIEW_LINES = 40
WIDE_LINE_CHARS = 300
# C0 and C1 controls but newline and tab, and the format characters that draw nothing or
# reorder text (zero-width, joiners, bidirectional marks and isolates, BOM, soft hyphen).
_HIDDEN = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u00ad\u061c\u180e\u200b-\u200f\u202a-\u202e"
    "\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb]"
)
_BLANK_RUN = re.compile(r"(?:\n[ \t]*(?=\n))+")
_CONTROL_NAMES = {
    "\x00": "NUL", "\x07": "BEL", "\x08": "BS", "\x0b": "VT", "\x0c": "FF", "\r": "CR",
    "\x1b": "ESC", "\x7f": "DEL", "\u200b": "ZWSP", "\u202e": "RLO", "\u202d": "LRO",
    "\ufeff": "BOM",
}


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


def preview(arguments: dict[str, Any], plan: PlannedWrite | None) -> tuple[str, list[str]]:
    """What the user is shown before approving (the command or code, a diff, else the
    arguments) with every control or invisible character as a visible ⟨NAME⟩ mark, and
    warnings about what a reader could miss in it."""
    command = arguments.get("command") or arguments.get("code")
    if command:
        raw = str(command)
    elif plan is not None and plan.existed and plan.old is None:
        raw = f"(replaces {plan.rel}, which is binary or too large to show)"
    elif plan is not None:
        diff = unified_diff(plan.old, plan.new, plan.rel) or f"(no change to {plan.rel})"
        raw = cap_text(diff, PREVIEW_LIMIT_CHARS)
    else:
        raw = "\n".join(f"{key}: {value}" for key, value in arguments.items())
    return made_visible(raw), hidden_parts(raw)


def made_visible(text: str) -> str:
    """`text` with each control or invisible character (ESC, CR, zero-width, direction
    marks) replaced by a visible mark, so what is shown cannot hide or reorder what runs."""
    return _HIDDEN.sub(lambda m: f"⟨{_name(m.group())}⟩", text)


def hidden_parts(text: str) -> list[str]:
    """Warnings about what a reader could miss in `text` (the raw command or content)."""
    warnings = []
    marks = Counter(_name(char) for char in _HIDDEN.findall(text))
    if marks:
        listed = ", ".join(f"{name} ×{count}" for name, count in marks.most_common())
        warnings.append(f"contains control or invisible characters, shown as ⟨…⟩: {listed}")
    lines = text.split("\n")
    blank_run = max((run.count("\n") for run in _BLANK_RUN.findall(text)), default=0)
    if blank_run >= BLANK_LINES_WARNED:
        warnings.append(f"has {blank_run} blank lines in a row: read on past them")
    if len(lines) > LONG_PREVIEW_LINES:
        warnings.append(f"is {len(lines)} lines long")
    widest = max(len(line) for line in lines)
    if widest > WIDE_LINE_CHARS:
        warnings.append(f"has a line of {widest:,} characters")
    return warnings


def _name(char: str) -> str:
    return _CONTROL_NAMES.get(char) or f"U+{ord(char):04X}"
