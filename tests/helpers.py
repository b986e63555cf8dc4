"""The in-process part of the test kit: a real tool context, calls as the loop makes them, a
terminal that records its events (`TerminalRecorder`), and snapshots of files on disk."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

import requests
from requests.adapters import HTTPAdapter

from core.main_terminal import MainTerminal
from core.services import build_services
from history.conversation import LEAF
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
from protocol.events import DoneReason, Event
from tests.fake_llm import FakeLLM
from tests.kit import EventLog, make_settings
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


class TerminalRecorder(MainTerminal, EventLog):
    """A `MainTerminal` run in-process whose every event, as it emits it, is recorded as a
    `Received` (it is an EventLog: `events`, `wait_for`, `named`, `wait_until`...)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        EventLog.__init__(self)
        super().__init__(*args, sink=self.collect, **kwargs)

    def collect(self, event: Event) -> None:
        self.record(event.name, event.to_wire())


def make_terminal(fake: FakeLLM, tmp_path: Path, **overrides: Any) -> TerminalRecorder:
    """A recording terminal on the fake model, workspace and data under tmp_path."""
    return TerminalRecorder(
        build_services(make_settings(fake, tmp_path, provider="deepseek", **overrides))
    )


def ask(
    terminal: MainTerminal, text: str, *, parent_id: str | None = LEAF, skill: str | None = None
) -> DoneReason:
    """Record the user's message and run its task to the end (`begin_task`, then `run_task`):
    what the terminal emitted meanwhile is in its recorder (a `TerminalRecorder`'s events)."""
    return terminal.run_task(terminal.begin_task(text, parent_id=parent_id, skill=skill))


def run_in_thread(terminal: MainTerminal, text: str) -> threading.Thread:
    """`ask(terminal, text)` in a daemon thread of its own, started."""
    thread = threading.Thread(target=ask, args=(terminal, text), daemon=True)
    thread.start()
    return thread


def live_command_lines(parent: int | None = None) -> dict[int, str]:
    """The command line of every live (not zombie) process on the machine, or of every child
    of `parent`, by pid."""
    found = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
            status = (proc / "status").read_text()
        except OSError:
            continue
        if "State:\tZ" in status or (parent is not None and f"\nPPid:\t{parent}\n" not in status):
            continue
        found[int(proc.name)] = argv
    return found


def journaled(ctx: ToolContext) -> ToolContext:
    """`ctx`, its calls now journaled for undo (task task-1 of conv-1) and able to propose
    edits."""
    journal = UndoJournal(ctx.settings.data_dir, ctx.workspace)
    ctx.journal = journal.task("conv-1", "task-1")
    ctx.proposals = ProposalStore(ctx.settings.data_dir, ctx.workspace, journal)
    return ctx


def session_from(address: str) -> requests.Session:
    """A requests session whose connections leave from `address`, one of 127.0.0.0/8: the
    server sees that client address, so an address a test gets throttled is its own."""
    adapter = HTTPAdapter()
    adapter.poolmanager.connection_pool_kw["source_address"] = (address, 0)
    session = requests.Session()
    session.mount("http://", adapter)
    return session
