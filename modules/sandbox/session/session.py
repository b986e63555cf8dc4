"""A conversation's sandbox session as its users (the tools, later the page and the terminal)
see it: one long-lived sandbox in which the conversation's commands and processes run, with
one network namespace and its own loopback, one /tmp, one process tree, one cgroup."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Unpack

from modules.sandbox.runner import CommandResult, RunOptions
from modules.sandbox.session import background
from modules.sandbox.session.background import Output
from modules.sandbox.session.foreground import run_foreground
from modules.sandbox.session.process import Port, ProcessInfo
from modules.sandbox.session.records import Origin
from modules.sandbox.session.supervised import SupervisedSandbox


class SandboxSession:
    """The face of one conversation's session (made by SessionPool, ended by it)."""

    def __init__(self, sandbox: SupervisedSandbox, kind: str, ends_with_process: bool) -> None:
        self.sandbox = sandbox
        self.kind = kind
        self.ends_with_process = ends_with_process  # `cli -p`: it ends when the run ends

    @property
    def conversation_id(self) -> str:
        return self.sandbox.conversation_id

    @property
    def ended(self) -> bool:
        return self.sandbox.closed or self.sandbox.end_reason is not None

    def run(self, argv: list[str], **options: Unpack[RunOptions]) -> CommandResult:
        """Run a foreground command to its end, timeout or cancel (as CommandRunner.run); what
        it leaves running is adopted as background processes (`CommandResult.left`)."""
        return run_foreground(self.sandbox, self.kind, argv, **options)

    def start(
        self, command: str, cwd: Path, settle: float | None = None, origin: Origin = "agent"
    ) -> Output:
        """Start `bash -c command` in the background for `origin` (see background.start); its
        first output and its ports. ProcessLimitReached past AGENT_MAX_PROCESSES."""
        wait = self.sandbox.config.settle_seconds if settle is None else settle
        return background.start(self.sandbox, command, cwd, wait, origin)

    def read(
        self,
        process_id: str,
        offset: int | None = None,
        wait: float = 0.0,
        until: Callable[[str], bool] | None = None,
    ) -> Output:
        """Output of a background process from `offset` (default: what was not read yet)."""
        return background.read(self.sandbox, process_id, offset, wait, until)

    def peek(self, process_id: str, offset: int, limit: int) -> Output:
        """Its output from `offset`, at most `limit` bytes, without waiting and without moving
        what the model has read (for the conversation's timeline)."""
        return background.peek(self.sandbox, process_id, offset, limit)

    def relay_sent(self, process_id: str, offset: int) -> None:
        """The timeline's relay sent its output up to `offset` (see ProcessOutput)."""
        background.relay_sent(self.sandbox, process_id, offset)

    def write(self, process_id: str, text: str, eof: bool = False) -> int:
        """Write to a background process's stdin; the bytes it took."""
        return background.write(self.sandbox, process_id, text, eof)

    def stop(self, process_id: str, signal: str = "TERM") -> ProcessInfo:
        """Stop a background process (TERM, INT or KILL; KILL after a grace)."""
        return background.stop(self.sandbox, process_id, signal)

    def processes(self) -> list[ProcessInfo]:
        """Every process of the conversation, running or ended (with why)."""
        return background.listing(self.sandbox)

    def ports(self) -> list[Port]:
        """The TCP ports the session's processes listen on."""
        return self.sandbox.ports()

    def connect(self, port: int, host: str = "127.0.0.1") -> Any:
        """A socket connected to `port` on the session's own loopback."""
        self.sandbox.touch()
        return self.sandbox.connect(port, host)

    @contextmanager
    def attached(self) -> Iterator[None]:
        """Keep the session from ending idle while someone uses it (a terminal, an app)."""
        with self.sandbox.in_use():
            yield
