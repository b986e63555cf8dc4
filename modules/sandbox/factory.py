"""Picks the runner AGENT_SANDBOX asks for."""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Unpack

from modules.sandbox.confinement import detect_confinement
from modules.sandbox.local_runner import LocalRunner
from modules.sandbox.runner import CommandResult, CommandRunner, RunOptions
from utils.settings import Settings

if TYPE_CHECKING:
    from modules.sandbox.session.network import NetworkMode
    from modules.sandbox.session.pool import SessionPool

log = logging.getLogger(__name__)


def build_runner(settings: Settings) -> CommandRunner:
    """The runner AGENT_SANDBOX asks for: `docker`, `local`, or `auto` (Docker when an engine
    answers and the image is present, else local). Local uses bubblewrap when it works."""
    if settings.sandbox == "docker" or (settings.sandbox == "auto" and _engine_may_answer()):
        from modules.sandbox.docker_runner import (
            docker_runner,  # the docker SDK only when asked for
        )

        runner = docker_runner(settings, required=settings.sandbox == "docker")
        if runner is not None:
            return runner
    confinement = detect_confinement(settings.local_sandbox, settings.workspace)
    local = LocalRunner(settings, confinement)
    log.info(
        "sandbox chosen",
        extra={"fields": {"kind": local.kind, "isolation": local.isolation}},
    )
    return local


def _engine_may_answer() -> bool:
    """Whether a Docker engine could answer at all (DOCKER_HOST, or the default socket): seen
    before the docker SDK, a tenth of a second of imports, is loaded for nothing."""
    return bool(os.environ.get("DOCKER_HOST")) or Path("/var/run/docker.sock").exists()


class DeferredRunner:
    """The runner `build_runner` picks, built when first needed: asking a Docker engine and
    probing bubblewrap cost a process that never runs a command (`cli -p` answering a question)
    up to a second. AGENT_SANDBOX=docker is built at once instead, so a missing engine is an
    error at start."""

    def __init__(self, settings: Settings, ends_with_run: bool = False) -> None:
        self._settings = settings
        self._ends_with_run = ends_with_run
        self._lock = threading.Lock()
        self._runner: CommandRunner | None = None

    @property
    def chosen(self) -> CommandRunner | None:
        """The runner, once something needed it."""
        return self._runner

    @property
    def built(self) -> CommandRunner:
        with self._lock:
            if self._runner is None:
                self._runner = with_sessions(build_runner(self._settings), self._ends_with_run)
            return self._runner

    @property
    def kind(self) -> str:
        return self.built.kind

    @property
    def isolation(self) -> list[str]:
        return self.built.isolation

    @property
    def python(self) -> str:
        return self.built.python

    def run(self, argv: list[str], **options: Unpack[RunOptions]) -> CommandResult:
        return self.built.run(argv, **options)

    def close(self) -> None:
        with self._lock:
            runner = self._runner
        if runner is not None:
            runner.close()


def runner_for(settings: Settings, ends_with_run: bool = False) -> CommandRunner:
    """What a process uses: built now for AGENT_SANDBOX=docker, else when first needed; a
    local one keeps a sandbox session per conversation (`ends_with_run`: `cli -p`, whose
    sessions end when its one task does)."""
    if settings.sandbox == "docker":
        return with_sessions(build_runner(settings), ends_with_run)
    return DeferredRunner(settings, ends_with_run)


def with_sessions(runner: CommandRunner, ends_with_run: bool = False) -> CommandRunner:
    """`runner` keeping a sandbox session per conversation, where it can (a local runner that
    runs commands at all, or Docker's)."""
    if isinstance(runner, LocalRunner) and runner.confinement.refusal is None:
        from modules.sandbox.session.session_runner import local_sessions

        return local_sessions(runner, ends_with_run)
    if runner.kind == "docker":  # checked by kind: the class would import the docker SDK
        from modules.sandbox.docker_runner import DockerRunner
        from modules.sandbox.session.session_runner import docker_sessions

        assert isinstance(runner, DockerRunner)
        return docker_sessions(runner, ends_with_run)
    return runner


def sessions_of(runner: CommandRunner) -> SessionPool | None:
    """The conversations' sandbox sessions `runner` keeps (built now if it was deferred); None
    where it runs each command in a sandbox of its own (a local runner that refuses
    commands)."""
    from modules.sandbox.session.session_runner import SessionRunner

    built = runner.built if isinstance(runner, DeferredRunner) else runner
    return built.sessions if isinstance(built, SessionRunner) else None


def network_of(runner: CommandRunner) -> NetworkMode:
    """What network `runner`'s commands have (docs/protocol.md §4 get_status.sandbox.network):
    `off` (their own loopback only), `outbound` (out, never the host's loopback services) or
    `host` (the host's own: no isolation, or local_sandbox.network)."""
    from modules.sandbox.session.session_runner import SessionRunner

    built = runner.built if isinstance(runner, DeferredRunner) else runner
    return built.network if isinstance(built, SessionRunner) else "off"  # commands refused
