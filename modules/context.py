"""What a tool call gets to work with: the workspace and the task's collaborators."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from core.cancel import CancelToken
from modules.annotations import AnnotationStore
from modules.focus import FocusFiles
from modules.memory_manager import MemoryStore
from modules.paths import Workspace
from modules.sandbox import CommandRunner
from utils.settings import Settings


def _ignore_output(_: str) -> None:
    return None


@dataclass
class ToolContext:
    settings: Settings
    workspace: Workspace
    runner: CommandRunner
    memory: MemoryStore
    annotations: AnnotationStore
    focus: FocusFiles
    conversation_id: str
    cancel: CancelToken = field(default_factory=CancelToken)
    on_output: Callable[[str], None] = _ignore_output
