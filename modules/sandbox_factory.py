"""Picks the runner AGENT_SANDBOX asks for."""

from __future__ import annotations

import logging

from modules.local_runner import LocalRunner
from modules.local_sandbox import detect_confinement
from modules.sandbox import CommandRunner
from utils.settings import Settings

log = logging.getLogger(__name__)


def build_runner(settings: Settings) -> CommandRunner:
    """The runner AGENT_SANDBOX asks for: `docker`, `local`, or `auto` (Docker when an engine
    answers and the image is present, else local). Local uses bubblewrap when it works."""
    if settings.sandbox in ("auto", "docker"):
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
