"""The local runner with sessions: a conversation's commands run in its long-lived session
(SessionPool), a command outside any conversation in a fresh sandbox of its own."""

from __future__ import annotations

from typing import Unpack

from modules.sandbox.local_runner import LocalRunner, environment_line
from modules.sandbox.runner import CommandResult, RunOptions
from modules.sandbox.session.launcher import LocalLauncher
from modules.sandbox.session.pool import SessionPool

SESSION_SCOPE = "a conversation's session"


class SessionRunner:
    """LocalRunner's sandbox, as one session per conversation."""

    def __init__(self, local: LocalRunner, ends_with_run: bool = False) -> None:
        settings = local.settings
        self.local = local
        self.kind = local.kind
        self.python = local.python
        launcher = LocalLauncher(settings, local.confinement, local.limits)
        pool = SessionPool(settings, launcher, local.limits, ends_with_run)
        self.sessions = pool
        minutes = f"{settings.session_idle_minutes:g}"
        self.isolation = [
            *local.confinement.isolation,
            *local.limits.describe(SESSION_SCOPE),
            local.disk_floor.describe(),
            environment_line(settings),
            "sessions: a conversation's commands and background processes share one sandbox "
            "that lives across commands (its own loopback network, /tmp and process tree, "
            f"under one memory and process limit); it ends after {minutes} minutes idle, when "
            "the conversation is deleted, and when the server stops, with all its processes",
        ]

    def run(self, argv: list[str], **options: Unpack[RunOptions]) -> CommandResult:
        """A command outside any conversation: in a fresh sandbox, as LocalRunner runs it."""
        return self.local.run(argv, **options)

    def close(self) -> None:
        """End every session (the server stops)."""
        self.sessions.close()
