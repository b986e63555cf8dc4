"""A real tool context on temporary folders, calls as the loop makes them, and snapshots of
files on disk.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from modules.results import ToolResult
from modules.sandbox.local_runner import LocalRunner
from modules.tools.catalogue import build_registry
from modules.tools.focus import FocusFiles
from modules.tools.memory import MemoryStore
from modules.tools.proposals import ProposalStore
from modules.tools.tool_context import ToolContext
from modules.undo.journal import UndoJournal
from modules.workspace.annotations import AnnotationStore
from modules.workspace.paths import Workspace
from tests.kit.settings import make_settings
from utils.cancel import CancelToken


def make_ctx(tmp_path: Path, **overrides: Any) -> ToolContext:
    """A real tool context on tmp_path/ws with data in tmp_path/data."""
    ws, data = tmp_path / "ws", tmp_path / "data"
    ws.mkdir(exist_ok=True)
    data.mkdir(exist_ok=True)
    settings = make_settings(None, tmp_path, **overrides)
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


def call(ctx: ToolContext, name: str, /, **arguments: Any) -> ToolResult:
    """Dispatch one tool call the way the agent loop does (`ctx` and `name` go by position, so
    a tool's own argument may be called `name`, as the skill tools' is)."""
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


def state(root: Path) -> dict[str, Any]:
    """Every path under `root` with its kind, mode and bytes (or link target)."""
    found: dict[str, Any] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath, name)
            rel = path.relative_to(root).as_posix()
            info = path.lstat()
            if path.is_symlink():
                found[rel] = ("link", os.readlink(path))
            elif path.is_dir():
                found[rel] = ("dir", info.st_mode & 0o7777)
            else:
                found[rel] = ("file", info.st_mode & 0o7777, path.read_bytes())
    return found


def journaled(ctx: ToolContext) -> ToolContext:
    """`ctx`, its calls now journaled for undo (task task-1 of conv-1) and able to propose
    edits."""
    journal = UndoJournal(ctx.settings.data_dir, ctx.workspace)
    ctx.journal = journal.task("conv-1", "task-1")
    ctx.proposals = ProposalStore(ctx.settings.data_dir, ctx.workspace, journal)
    return ctx
