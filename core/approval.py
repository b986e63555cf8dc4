"""Which calls wait for the user, what they are shown, and the wait itself."""

from __future__ import annotations

import re
import stat
import threading
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from modules.results import PlannedWrite, ToolError
from modules.tools.registry import Tool
from modules.workspace.paths import Workspace
from modules.workspace.text_files import unified_diff
from protocol.options import Approval
from utils.cancel import CancelToken
from utils.text import cap_text

if TYPE_CHECKING:
    from modules.undo.config_hold import HeldChanges

PREVIEW_LIMIT_CHARS = 20_000
BLANK_LINES_WARNED = 3
LONG_PREVIEW_LINES = 40
WIDE_LINE_CHARS = 300
DELETE_HEAD_LINES = 20
DELETE_LINE_CHARS = 200
DELETE_READ_BYTES = 256 * 1024
FOLDER_ENTRIES_SHOWN = 20
FOLDER_WALK_LIMIT = 5000
CONFIG_SHOWN = 5  # reasons listed for a change to the program's own configuration
CONFIG_NOTE = "Changes to Workspace Agent's own configuration always ask, even in auto mode"
# C0 and C1 controls but newline and tab, and the format characters that draw nothing or
# reorder text (zero-width, joiners, bidirectional marks and isolates, BOM, soft hyphen).
_HIDDEN = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u00ad\u061c\u180e\u200b-\u200f\u202a-\u202e"
    "\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb]"
)
_BLANK_RUN = re.compile(r"(?:\n[ \t]*(?=\n))+")
_CONTROL_NAMES = {
    "\x00": "NUL",
    "\x07": "BEL",
    "\x08": "BS",
    "\x0b": "VT",
    "\x0c": "FF",
    "\r": "CR",
    "\x1b": "ESC",
    "\x7f": "DEL",
    "\u200b": "ZWSP",
    "\u202e": "RLO",
    "\u202d": "LRO",
    "\ufeff": "BOM",
}


class ApprovalGate:
    """Holds the calls waiting for an answer; one per conversation."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiting: dict[str, tuple[str, threading.Event]] = {}
        self._answers: dict[str, bool] = {}
        self.always_allowed: set[str] = set()

    def needs_approval(
        self, mode: Approval, tool: Tool, planned: PlannedChange | None, *, config: bool = False
    ) -> bool:
        """Whether this call waits for the user: always when it changes the program's own
        configuration (`config`), whatever was always allowed; else in `ask` mode, by the
        policy its tool was registered with."""
        if config:
            return mode != "read-only"
        if mode != "ask" or tool.name in self.always_allowed:
            return False
        if tool.asks == "on_overwrite":
            return isinstance(planned, PlannedWrite) and planned.overwrites
        return tool.asks == "always"

    def allowed(self) -> list[str]:
        """The tools the user chose to always allow here, by name."""
        with self._lock:
            return sorted(self.always_allowed)

    def revoke(self, tool: str) -> bool:
        """Ask again before `tool`; False when it was not always allowed."""
        with self._lock:
            if tool not in self.always_allowed:
                return False
            self.always_allowed.discard(tool)
            return True

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


@dataclass(frozen=True)
class PlannedDelete:
    """What a `delete_file` call would remove, described for the user."""

    rel: str
    description: str


PlannedChange = PlannedWrite | PlannedDelete  # what a changing call would change


def planned_change(tool: Tool, args: Any, workspace: Workspace) -> PlannedChange | None:
    """What a changing call would change (a write, or what a deletion removes); None for
    other tools and for calls that will fail."""
    try:
        if tool.name == "delete_file":
            return _planned_delete(workspace, str(args.path))
        if tool.plan is None:
            return None
        return tool.plan(workspace, args)
    except (ToolError, OSError):
        return None


def _planned_delete(workspace: Workspace, path: str) -> PlannedDelete | None:
    rel = workspace.relative(workspace.resolve(path, for_write=True, follow_symlinks=False))
    info = workspace.lstat(rel)
    if info is None:
        return None
    if stat.S_ISLNK(info.st_mode):
        text = f"Delete the link {rel} → {workspace.readlink(rel)} (what it points to stays)."
    elif stat.S_ISDIR(info.st_mode):
        text = _describe_folder(workspace, rel)
    elif stat.S_ISREG(info.st_mode):
        text = _describe_file(workspace, rel, info.st_size)
    else:
        text = f"Delete {rel} (not a regular file)."
    return PlannedDelete(rel, text)


def _describe_file(workspace: Workspace, rel: str, size: int) -> str:
    if size == 0:
        return f"Delete {rel}: an empty file."
    data = workspace.read_bytes(rel, DELETE_READ_BYTES)
    if b"\x00" in data[:8192]:
        return f"Delete {rel}: {human_size(size)}, binary."
    lines = data.decode("utf-8", errors="replace").splitlines()
    whole = len(data) >= size
    counted = _count(len(lines), "line") if whole else "many lines"
    head = [
        line if len(line) <= DELETE_LINE_CHARS else line[:DELETE_LINE_CHARS] + " …"
        for line in lines[:DELETE_HEAD_LINES]
    ]
    if len(lines) <= DELETE_HEAD_LINES and whole:
        return f"Delete {rel}: {human_size(size)}, {counted}:\n" + "\n".join(head)
    rest = f"… {len(lines) - DELETE_HEAD_LINES:,} more lines" if whole else "… and the rest"
    return (
        f"Delete {rel}: {human_size(size)}, {counted}. The first {len(head)}:\n"
        + "\n".join(head)
        + f"\n{rest}"
    )


def _describe_folder(workspace: Workspace, rel: str) -> str:
    top = sorted(workspace.list_dir(rel), key=lambda entry: entry[0])
    if not top:
        return f"Delete the empty folder {rel}."
    files = folders = size = 0
    pending = [f"{rel}/{name}" for name, info in top if stat.S_ISDIR(info.st_mode)]
    seen = [info for _, info in top]
    while pending and len(seen) < FOLDER_WALK_LIMIT:
        folder = pending.pop()
        entries = workspace.list_dir(folder)
        seen += [info for _, info in entries]
        pending += [f"{folder}/{name}" for name, info in entries if stat.S_ISDIR(info.st_mode)]
    for info in seen:
        if stat.S_ISDIR(info.st_mode):
            folders += 1
        else:
            files += 1
            size += info.st_size
    counted = f"{_count(files, 'file')}, {_count(folders, 'folder')}, {human_size(size)}" + (
        "" if not pending else f" (at least: stopped counting at {len(seen):,})"
    )
    shown = [
        f"{name}/" if stat.S_ISDIR(info.st_mode) else name
        for name, info in top[:FOLDER_ENTRIES_SHOWN]
    ]
    more = f"\n… {len(top) - len(shown):,} more" if len(top) > len(shown) else ""
    return (
        f"Delete the folder {rel} and everything in it: {counted}. It holds:\n"
        + "\n".join(shown)
        + more
    )


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}{'s' * (n != 1)}"


def human_size(size: int) -> str:
    """`size` bytes for a reader: 532 bytes, 1.2 KB, 3.4 MB."""
    if size < 1024:
        return _count(size, "byte")
    scaled, unit = size / 1024, "KB"
    for larger in ("MB", "GB"):
        if scaled < 1024:
            break
        scaled, unit = scaled / 1024, larger
    return f"{scaled:,.1f} {unit}"


def preview(
    arguments: dict[str, Any], planned: PlannedChange | None, config: Sequence[str] = ()
) -> tuple[str, list[str]]:
    """What the user is shown before approving (the command or code, a diff, what a deletion
    removes, else the arguments) with every control or invisible character as a visible
    ⟨NAME⟩ mark, and warnings about what a reader could miss in it; first, why the call
    changes the program's own configuration (`config`: the reasons of ProtectedPaths)."""
    command = arguments.get("command") or arguments.get("code")
    if command:
        raw = str(command)
    elif isinstance(planned, PlannedDelete):
        raw = planned.description
    elif planned is not None and planned.existed and planned.old is None:
        raw = f"(replaces {planned.rel}, which is binary or too large to show)"
    elif planned is not None:
        diff = (
            unified_diff(planned.old, planned.new, planned.rel) or f"(no change to {planned.rel})"
        )
        raw = cap_text(diff, PREVIEW_LIMIT_CHARS)
    else:
        raw = "\n".join(f"{key}: {value}" for key, value in arguments.items())
    head = "".join(f"This changes {why}.\n" for why in config)
    return made_visible(head + raw), config_warnings(config) + hidden_parts(raw)


def held_preview(held: HeldChanges) -> tuple[str, list[str]]:
    """What the user is shown of a command's changes to the program's own configuration,
    held until they are approved: why they matter, then their diff."""
    raw = cap_text(held.diff(), PREVIEW_LIMIT_CHARS)
    head = "".join(f"This command changed {why}.\n" for why in held.reasons[:CONFIG_SHOWN])
    if len(held.reasons) > CONFIG_SHOWN:
        head += f"This command changed {len(held.reasons) - CONFIG_SHOWN} more paths there.\n"
    head += "This stays only if you approve it; declining puts it back as it was.\n"
    return made_visible(head + raw), config_warnings(held.reasons) + hidden_parts(raw)


def split_reasons(shown: str) -> tuple[list[str], str]:
    """A preview's first lines that say why it changes the program's own configuration (each
    starts with "This "), and the rest: what `preview` and `held_preview` put together."""
    lines = shown.split("\n")
    count = next((n for n, line in enumerate(lines) if not line.startswith("This ")), len(lines))
    return lines[:count], "\n".join(lines[count:])


def config_warnings(reasons: Sequence[str]) -> list[str]:
    """The warnings of a call that changes the program's own configuration, one per reason
    (at most CONFIG_SHOWN), to be read after "This change" or "it"."""
    warnings = [f"touches {made_visible(why)}. {CONFIG_NOTE}" for why in reasons[:CONFIG_SHOWN]]
    if len(reasons) > CONFIG_SHOWN:
        warnings.append(f"touches {len(reasons) - CONFIG_SHOWN} more paths of its configuration")
    return warnings


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
