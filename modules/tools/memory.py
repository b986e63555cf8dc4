"""Memory the model keeps across turns: one main file and one per task (conversation)."""

from __future__ import annotations

import re
import threading
from pathlib import Path

from modules.results import ToolError
from protocol.options import MemoryScope
from utils.files import atomic_write

MEMORY_LIMIT_CHARS = 20_000
_SAFE_ID = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")


class MemoryStore:
    """Markdown files under `data_dir/memory/`: `main.md` and `tasks/<conversation_id>.md`."""

    def __init__(self, data_dir: Path, limit: int = MEMORY_LIMIT_CHARS) -> None:
        self.root = Path(data_dir) / "memory"
        self.limit = limit
        self._lock = threading.Lock()

    def path(self, scope: MemoryScope, conversation_id: str) -> Path:
        """The file that holds `scope`'s memory."""
        if scope == "main":
            return self.root / "main.md"
        if scope != "task":
            raise ToolError(f"Unknown memory scope {scope!r}; use 'main' or 'task'")
        if not _SAFE_ID.match(conversation_id) or conversation_id.strip(".") == "":
            raise ToolError(f"Invalid conversation id {conversation_id!r} for task memory")
        return self.root / "tasks" / f"{conversation_id}.md"

    def read(self, scope: MemoryScope, conversation_id: str) -> str:
        """The memory text ("" when nothing was saved yet)."""
        try:
            return self.path(scope, conversation_id).read_text(encoding="utf-8")
        except FileNotFoundError:
            return ""

    def append(self, scope: MemoryScope, conversation_id: str, content: str) -> str:
        """Add `content` on a new line at the end; returns the new text."""
        with self._lock:
            current = self.read(scope, conversation_id)
            joined = f"{current.rstrip()}\n{content}" if current.strip() else content
            return self._write(scope, conversation_id, joined)

    def replace(self, scope: MemoryScope, conversation_id: str, content: str) -> str:
        """Replace the whole memory with `content`; returns it."""
        with self._lock:
            return self._write(scope, conversation_id, content)

    def forget(self, conversation_id: str) -> None:
        """Remove a conversation's task memory (the conversation is being deleted)."""
        with self._lock:
            self.path("task", conversation_id).unlink(missing_ok=True)

    def _write(self, scope: MemoryScope, conversation_id: str, text: str) -> str:
        text = text.rstrip() + "\n" if text.strip() else ""
        if len(text) > self.limit:
            raise ToolError(
                f"{scope} memory would be {len(text):,} characters, over the "
                f"{self.limit:,} limit. Use operation 'replace' with a condensed version."
            )
        atomic_write(self.path(scope, conversation_id), text)
        return text
