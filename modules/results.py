"""What tools report: a failure the model can act on, their output and the changes they made."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from protocol.event_values import FileChange
from utils.errors import Invalid


class ToolError(Invalid):
    """A failure the model should read and can act on; `details` go to the fronts. Asked by a
    front rather than the model, the request was invalid."""

    def __init__(self, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.details = details or {}


@dataclass
class ToolOutput:
    """What a tool returns when it changed the workspace."""

    text: str
    changes: list[FileChange] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)  # structured extras for the fronts
    ends_loop: bool = False  # the task's tool loop stops after this turn (a plan step's end)


@dataclass
class ToolResult:
    ok: bool
    output: str
    duration_ms: int = 0
    changes: list[FileChange] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)
    ends_loop: bool = False
    declined: bool = False  # the user declined the call: it did not run


@dataclass
class PlannedWrite:
    """A write a tool is about to make: the text before (None: unseen or absent) and after."""

    path: Path
    rel: str
    existed: bool
    old: str | None
    new: str
    summary: str

    @property
    def overwrites(self) -> bool:
        """Whether content that exists now would be lost (appending loses nothing)."""
        return self.existed and (self.old is None or not self.new.startswith(self.old))
