"""Picks the runner AGENT_SANDBOX asks for."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from modules.local_runner import LocalRunner
from modules.local_sandbox import detect_confinement
from modules.sandbox import CommandRunner
from utils.settings import Settings

log = logging.getLogger(__name__)


def build_runner(settings: Settings) -> CommandRunner:
    """The runner AGENT_SANDBOX asks for: `docker`, `local`, or `auto` (Docker when an engine
    answers and the image is present, else local). Local uses bubblewrap when it works."""
    if settings.sandbox == "docker" or (settings.sandbox == "auto" and _engine_may_answer()):
        from modules.docker_sandbox import docker_runner  # the docker SDK only when asked for

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
