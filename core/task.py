"""One task, a user message's run: everything that lives exactly as long as it does."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from modules.undo import TaskJournal
from utils.cancel import CancelToken
from utils.completion import Completion, Usage
from utils.conversation_store import Conversation
from utils.settings import Approval, Mode

REPEAT_WARNING_AFTER = 8


@dataclass
class Task:
    """The running task's conversation, settings, cancel token, undo journal and counters."""

    conversation: Conversation
    user_record: dict[str, Any]
    journal: TaskJournal
    mode: Mode
    approval: Approval
    cancel: CancelToken = field(default_factory=CancelToken)
    usage: Usage = field(default_factory=Usage)
    iteration: int = 0
    trace_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    _repeat: tuple[str, int] = ("", 0)

    def thinks(self) -> bool:
        """Seed policy: `thinking` thinks on the first model call of a task only."""
        return self.mode == "thinking" and self.iteration == 1

    def repeat_warning(self, tool: str) -> str:
        """A note for the model once the same tool has run REPEAT_WARNING_AFTER times in a row."""
        last, count = self._repeat
        count = count + 1 if tool == last else 1
        self._repeat = (tool, count)
        if count < REPEAT_WARNING_AFTER:
            return ""
        return (f"\n\n[warning] {tool} has now been called {count} times in a row. "
                "If this is not making progress, change approach or finish the task.")


@dataclass
class StreamProgress:
    """What one model call has streamed so far, kept for an answer that gets interrupted."""

    content: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    tool_names: dict[str, str] = field(default_factory=dict)

    def partial(self) -> Completion:
        return Completion(content="".join(self.content), reasoning_content="".join(self.reasoning))
