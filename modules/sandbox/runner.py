"""Where commands run: the interface every runner (local, bubblewrap, Docker) implements."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from utils.cancel import CancelToken


@dataclass
class CommandResult:
    exit_code: int | None
    output: str
    timed_out: bool
    omitted_chars: int
    duration_ms: int
    note: str = ""  # a limit the command ran into, said to the model with its output


class SandboxUnavailable(OSError):
    """The configured sandbox cannot run here."""


class CommandRunner(Protocol):
    """Runs one command to completion: locally, under bubblewrap, or in a Docker container."""

    # Read-only for its users: a runner may keep them as attributes or work them out.
    @property
    def kind(self) -> str:
        """Its name: "local", "bubblewrap" or "docker" (docs/protocol.md §4 get_status)."""

    @property
    def isolation(self) -> list[str]:
        """Plain statements of what is and is not protected."""

    @property
    def python(self) -> str:
        """The interpreter run_python starts inside this sandbox."""

    def run(
        self,
        argv: list[str],
        *,
        cwd: Path,
        timeout: float,
        cancel: CancelToken,
        on_output: Callable[[str], None],
        stdin: str | None = None,
    ) -> CommandResult: ...

    def close(self) -> None:
        """Release what the runner holds (containers); it may not be used afterwards."""


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists (it may belong to another user)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
