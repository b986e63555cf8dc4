"""Where commands run: the interface every runner (local, bubblewrap, Docker) implements."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import NotRequired, Protocol, TypedDict, Unpack

from modules.sandbox.output import OutputBuffer
from utils.cancel import CancelToken, TaskCancelled

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LeftRunning:
    """A process a command left running when it exited: adopted as the conversation's
    background process `process_id`, or (None) killed, the limit of them being reached."""

    process_id: str | None
    pid: int
    command: str
    ports: tuple[int, ...] = ()


@dataclass
class CommandResult:
    exit_code: int | None
    output: str
    timed_out: bool
    omitted_chars: int
    duration_ms: int
    note: str = ""  # a limit the command ran into, said to the model with its output
    left: tuple[LeftRunning, ...] = ()  # what it left running, in a session


class SandboxUnavailable(OSError):
    """The configured sandbox cannot run here."""


class RunOptions(TypedDict):
    """How one command runs: in which folder, for how long at most, what stops it, where its
    output goes as it comes, and what it reads on its standard input (None: nothing)."""

    cwd: Path
    timeout: float
    cancel: CancelToken
    on_output: Callable[[str], None]
    stdin: NotRequired[str | None]


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

    def run(self, argv: list[str], **options: Unpack[RunOptions]) -> CommandResult:
        """Run `argv` in a sandbox of its own (outside any conversation's session)."""

    def close(self) -> None:
        """Release what the runner holds (containers, sessions); it may not be used afterwards."""


def finished(
    argv: list[str],
    kind: str,
    started: float,
    cancel: CancelToken,
    ended: tuple[int | None, bool],
    buffer: OutputBuffer,
    note: str,
) -> CommandResult:
    """A command's result, logged: `ended` is its exit code (None when it was killed) and
    whether its time ran out; TaskCancelled when the task was stopped meanwhile."""
    exit_code, timed_out = ended
    duration_ms = int((time.monotonic() - started) * 1000)
    fields = {"argv0": argv[0], "sandbox": kind, "exit_code": exit_code,
              "timed_out": timed_out, "duration_ms": duration_ms}  # fmt: skip
    log.info("command finished", extra={"fields": fields})
    if cancel.cancelled:
        raise TaskCancelled()
    return CommandResult(exit_code, buffer.text(), timed_out, buffer.omitted, duration_ms, note)


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists (it may belong to another user)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
