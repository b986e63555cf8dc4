"""What a tool call gets to work with: the workspace and the task's collaborators."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from modules.sandbox.factory import sessions_of
from modules.sandbox.runner import CommandRunner
from modules.skills import SkillCatalog
from modules.tools.focus import FocusFiles
from modules.tools.memory import MemoryStore
from modules.workspace.annotations import AnnotationStore
from modules.workspace.paths import Workspace
from utils.cancel import CancelToken
from utils.settings import Settings

if TYPE_CHECKING:
    from modules.sandbox.session.session import SandboxSession
    from modules.tools.proposals import ProposalStore
    from modules.undo.journal import TaskJournal


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
    call_id: str = ""  # the call being run
    cancel: CancelToken = field(default_factory=CancelToken)
    on_output: Callable[[str], None] = _ignore_output
    journal: TaskJournal | None = None
    proposals: ProposalStore | None = None
    skills: SkillCatalog | None = None

    @property
    def session(self) -> SandboxSession | None:
        """The conversation's sandbox session, started on first use (SandboxUnavailable when
        it cannot start); None where the runner runs each command in a sandbox of its own."""
        sessions = sessions_of(self.runner)
        return None if sessions is None else sessions.session(self.conversation_id)
