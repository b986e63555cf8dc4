"""The environment a command or an MCP server starts with: an allow-list, never the server's
environment minus the secrets it knows of (an `ACME_PASSWORD` is no less a secret)."""

from __future__ import annotations

import os
from collections.abc import Mapping

from utils.settings import Settings

BASE_NAMES = ("PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "TZ", "LANG", "LANGUAGE")
BASE_PREFIXES = ("LC_",)


def base_environment(source: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The variables every program may see: where programs are, the locale, the terminal."""
    return {
        name: value
        for name, value in source.items()
        if name in BASE_NAMES or name.startswith(BASE_PREFIXES)
    }


def named_variables(settings: Settings, source: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The variables the user lets commands have (AGENT_COMMAND_ENV), save one that holds a
    secret of ours."""
    secrets = set(settings.secrets())
    return {
        name: source[name]
        for name in settings.command_env
        if name in source and source[name] not in secrets
    }


def command_environment(
    settings: Settings, source: Mapping[str, str] = os.environ
) -> dict[str, str]:
    """A local command's environment: the base and the named variables, no secret's value."""
    secrets = set(settings.secrets())
    base = {k: v for k, v in base_environment(source).items() if v not in secrets}
    return {**base, **named_variables(settings, source), "PYTHONUNBUFFERED": "1"}
