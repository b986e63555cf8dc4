"""A `MainTerminal` run in-process that records its events (`TerminalRecorder`), and `ask`,
which runs one task on it through the product's public methods.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from core.main_terminal import MainTerminal
from core.services import build_services
from history.conversation import LEAF
from protocol.events import DoneReason, Event
from tests.fake_llm import FakeLLM
from tests.kit.events import EventLog
from tests.kit.settings import make_settings


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
