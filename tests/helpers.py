"""Helpers the test modules share: a real tool context, calls as the loop makes them."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from modules.annotations import AnnotationStore
from modules.context import ToolContext
from modules.focus import FocusFiles
from modules.local_runner import LocalRunner
from modules.memory_manager import MemoryStore
from modules.paths import Workspace
from modules.results import ToolResult
from modules.tools import build_registry
from utils.cancel import CancelToken
from utils.settings import Settings


def make_ctx(tmp_path: Path, **overrides: Any) -> ToolContext:
    """A real tool context on tmp_path/ws with data in tmp_path/data."""
    ws, data = tmp_path / "ws", tmp_path / "data"
    ws.mkdir(exist_ok=True)
    data.mkdir(exist_ok=True)
    settings = Settings(workspace=ws, data_dir=data, **overrides)
    return ToolContext(
        settings=settings,
        workspace=Workspace(ws),
        runner=LocalRunner(settings),
        memory=MemoryStore(data),
        annotations=AnnotationStore(data),
        focus=FocusFiles(),
        conversation_id="conv-1",
        cancel=CancelToken(),
    )


def call(ctx: ToolContext, name: str, **arguments: Any) -> ToolResult:
    """Dispatch one tool call the way the agent loop does."""
    return build_registry().dispatch(name, json.dumps(arguments), ctx)


def snapshot(tmp_path: Path) -> dict[str, Any]:
    """Every entry outside the workspace and data dir, with content and mode."""
    state: dict[str, Any] = {}
    for dirpath, dirnames, filenames in os.walk(tmp_path):
        if Path(dirpath) == tmp_path:
            dirnames[:] = [d for d in dirnames if d not in ("ws", "data")]
        for name in dirnames + filenames:
            path = Path(dirpath, name)
            st = path.lstat()
            content = path.read_bytes() if path.is_file() and not path.is_symlink() else None
            state[str(path)] = (st.st_mode, content)
    return state
