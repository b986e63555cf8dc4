"""A runner with sessions: a conversation's commands run in its long-lived session
(SessionPool), a command outside any conversation in a fresh sandbox of the runner's own, as
it always ran them. Local sessions are bubblewrap's (or unshare's, or plain), Docker's are a
container per conversation."""

from __future__ import annotations

from typing import TYPE_CHECKING, Unpack

from modules.sandbox.local_runner import LocalRunner, environment_line
from modules.sandbox.runner import CommandResult, CommandRunner, RunOptions
from modules.sandbox.session.launcher import LocalLauncher, SessionLauncher
from modules.sandbox.session.network import NETWORK_LINES, NetworkMode
from modules.sandbox.session.pool import SessionPool
from utils.settings import Settings

if TYPE_CHECKING:
    from modules.sandbox.docker_runner import DockerRunner

SESSION_SCOPE = "a conversation's session"


class SessionRunner:
    """A runner's sandbox, as one session per conversation."""

    def __init__(
        self,
        settings: Settings,
        fresh: CommandRunner,
        launcher: SessionLauncher,
        isolation: list[str],
        ends_with_run: bool = False,
    ) -> None:
        self.fresh = fresh
        self.launcher = launcher
        self.kind = fresh.kind
        self.python = fresh.python
        self.network: NetworkMode = launcher.network
        self.sessions = SessionPool(settings, launcher, ends_with_run)
        minutes = f"{settings.session_idle_minutes:g}"
        self.isolation = [
            *isolation,
            "sessions: a conversation's commands and background processes share one sandbox "
            "that lives across commands (its own network namespace, /tmp and process tree, "
            f"under one memory and process limit); it ends after {minutes} minutes idle, when "
            "the conversation is deleted, and when the server stops, with all its processes",
        ]

    def run(self, argv: list[str], **options: Unpack[RunOptions]) -> CommandResult:
        """A command outside any conversation: in a fresh sandbox, as the runner runs it."""
        return self.fresh.run(argv, **options)

    def close(self) -> None:
        """End every session (the server stops), then the runner's own sandboxes."""
        self.sessions.close()
        self.launcher.close()
        self.fresh.close()


def local_sessions(local: LocalRunner, ends_with_run: bool = False) -> SessionRunner:
    """`local`'s sandbox (bubblewrap, unshare or plain), one session per conversation."""
    settings = local.settings
    launcher = LocalLauncher(settings, local.confinement, local.limits)
    confined = list(local.confinement.isolation)
    if launcher.network == "outbound":
        confined = [NETWORK_LINES["outbound"], *confined[1:]]  # the first line is the network
    isolation = [
        *confined,
        *local.limits.describe(SESSION_SCOPE),
        local.disk_floor.describe(),
        environment_line(settings),
    ]
    return SessionRunner(settings, local, launcher, isolation, ends_with_run)


def docker_sessions(docker: DockerRunner, ends_with_run: bool = False) -> SessionRunner:
    """Docker's sandbox, one container per conversation whose main process is the
    supervisor."""
    from modules.sandbox.session.docker_launcher import NETWORK_LINES as DOCKER_LINES
    from modules.sandbox.session.docker_launcher import DockerLauncher

    settings = docker.settings
    launcher = DockerLauncher(settings, docker.client, docker.user, docker.pool.owner)
    isolation = [DOCKER_LINES[launcher.network], *docker.isolation[1:]]  # the network's first
    return SessionRunner(settings, docker, launcher, isolation, ends_with_run)
