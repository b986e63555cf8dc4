"""Where commands run: the CommandRunner interface, the local runner and `build_runner`."""

from __future__ import annotations

import codecs
import contextlib
import logging
import os
import selectors
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from core.cancel import CancelToken, TaskCancelled
from modules.local_sandbox import Confinement, ResourceLimits, detect_confinement, plain
from utils.settings import SECRET_ENV_NAMES, Settings

log = logging.getLogger(__name__)

KILL_GRACE_SECONDS = 1.0  # between SIGTERM and SIGKILL on timeout
EXIT_DRAIN_SECONDS = 0.5  # after the command exits, how long leftover children may hold its output
_READ_SIZE = 65536
_POLL_SECONDS = 0.05


@dataclass
class CommandResult:
    exit_code: int | None
    output: str
    timed_out: bool
    omitted_chars: int
    duration_ms: int


class SandboxUnavailable(OSError):
    """The configured sandbox cannot run here."""


class CommandRunner(Protocol):
    """Runs one command to completion: locally, under bubblewrap, or in a Docker container."""

    kind: str  # "local", "bubblewrap" or "docker" (PROTOCOL §4 get_status)
    isolation: list[str]  # plain statements of what is and is not protected
    python: str  # the interpreter run_python starts inside this sandbox

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


class OutputBuffer:
    """Keeps the first and last characters of a stream within `limit`, counting the rest."""

    def __init__(self, limit: int) -> None:
        self.head_limit = limit * 2 // 3
        self.tail_limit = limit - self.head_limit
        self.head = ""
        self.tail = ""
        self.total = 0

    def add(self, text: str) -> None:
        """Take in the next piece of the stream."""
        self.total += len(text)
        room = self.head_limit - len(self.head)
        if room > 0:
            self.head += text[:room]
            text = text[room:]
        if text:
            self.tail = (self.tail + text)[-self.tail_limit :]

    @property
    def omitted(self) -> int:
        """How many characters were cut from the middle."""
        return self.total - len(self.head) - len(self.tail)

    def text(self) -> str:
        """Head and tail, with a marker counting what was cut between them."""
        if self.omitted:
            return f"{self.head}\n… [{self.omitted} characters omitted] …\n{self.tail}"
        return self.head + self.tail


def scrubbed_env(settings: Settings) -> dict[str, str]:
    """The agent's environment without API keys, tokens or any value equal to a secret."""
    secrets = set(settings.secrets())
    env = {
        name: value
        for name, value in os.environ.items()
        if name not in SECRET_ENV_NAMES and value not in secrets
    }
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _group_alive(pgid: int) -> bool:
    """True while a live (not zombie) process remains in the group."""
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    proc = Path("/proc")
    if not proc.is_dir():
        return True
    # Orphaned members become zombies until init reaps them, which can take seconds.
    for stat in proc.glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) == pgid and fields[0] != "Z":
                return True
    return False


class _Run:
    """One running command: its process group, its output pipe and its deadlines."""

    def __init__(self, proc: subprocess.Popen[bytes], limit: int, on_output: Callable[[str], None]):
        self.proc = proc
        self.pgid = proc.pid  # start_new_session makes the child its group's leader
        self.buffer = OutputBuffer(limit)
        self.on_output = on_output
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.selector = selectors.DefaultSelector()
        assert proc.stdout is not None
        self.fd = proc.stdout.fileno()
        os.set_blocking(self.fd, False)
        self.selector.register(self.fd, selectors.EVENT_READ)
        self.eof = False

    def emit(self, text: str) -> None:
        if text:
            self.buffer.add(text)
            self.on_output(text)

    def pump(self, wait: float) -> None:
        """Wait up to `wait` seconds for output and pass on one chunk of it."""
        if self.eof:
            time.sleep(wait)
            return
        if not self.selector.select(wait):
            return
        try:
            chunk = os.read(self.fd, _READ_SIZE)
        except BlockingIOError:
            return
        if chunk:
            self.emit(self.decoder.decode(chunk))
        else:
            self.eof = True

    def until(self, deadline: float, done: Callable[[], bool]) -> bool:
        """Pump output until `done()` or the deadline; True when done."""
        while not done():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self.pump(min(left, _POLL_SECONDS))
        return True

    def finished(self) -> bool:
        return self.eof and self.proc.poll() is not None

    def terminate(self) -> None:
        """SIGTERM the whole group, then SIGKILL whatever is left after the grace."""
        _signal_group(self.pgid, signal.SIGTERM)

        def group_gone() -> bool:
            self.proc.poll()
            return not _group_alive(self.pgid)

        self.until(time.monotonic() + KILL_GRACE_SECONDS, group_gone)
        _signal_group(self.pgid, signal.SIGKILL)

    def close(self) -> None:
        if self.proc.poll() is None:
            _signal_group(self.pgid, signal.SIGKILL)
        self.emit(self.decoder.decode(b"", final=True))
        self.selector.close()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=KILL_GRACE_SECONDS)


class LocalRunner:
    """Runs commands as local subprocesses, each in its own session and process group,
    under resource limits and, when given one, a confinement (bubblewrap or unshare)."""

    def __init__(self, settings: Settings, confinement: Confinement | None = None) -> None:
        self.settings = settings
        self.confinement = confinement or plain()
        self.limits = ResourceLimits(settings.local_sandbox)
        self.kind = self.confinement.kind
        self.isolation = [
            *self.confinement.isolation,
            self.limits.describe(),
            "environment: API keys and tokens removed",
        ]
        self.python = sys.executable

    def close(self) -> None:
        """Nothing to release: every command's processes are gone when it returns."""

    def run(
        self,
        argv: list[str],
        *,
        cwd: Path,
        timeout: float,
        cancel: CancelToken,
        on_output: Callable[[str], None],
        stdin: str | None = None,
    ) -> CommandResult:
        """Run `argv` to completion, timeout or cancellation; output streamed and capped."""
        cancel.raise_if_cancelled()
        started = time.monotonic()
        with self.limits.applied() as preexec:
            proc = self._spawn(argv, cwd, stdin is not None, preexec)
            run = _Run(proc, self.settings.output_limit_chars, on_output)
            unregister = cancel.on_cancel(lambda: _signal_group(run.pgid, signal.SIGKILL))
            try:
                if stdin is not None:
                    _feed_stdin(proc, stdin)
                timed_out = self._wait(run, started + timeout)
            finally:
                unregister()
                run.close()
        duration_ms = int((time.monotonic() - started) * 1000)
        fields = {"argv0": argv[0], "sandbox": self.kind, "exit_code": proc.returncode,
                  "timed_out": timed_out, "duration_ms": duration_ms}  # fmt: skip
        log.info("command finished", extra={"fields": fields})
        if cancel.cancelled:
            raise TaskCancelled()
        exit_code = None if timed_out else proc.returncode
        buffer = run.buffer
        return CommandResult(exit_code, buffer.text(), timed_out, buffer.omitted, duration_ms)

    def _spawn(
        self, argv: list[str], cwd: Path, with_stdin: bool, preexec: Callable[[], None]
    ) -> subprocess.Popen[bytes]:
        """Start the confined command as the leader of a new session and process group."""
        return subprocess.Popen(
            self.confinement.wrap(argv, self.settings.workspace, cwd),
            cwd=cwd,
            env=scrubbed_env(self.settings),
            stdin=subprocess.PIPE if with_stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=preexec,  # resource limits; it makes only system calls
        )

    def _wait(self, run: _Run, deadline: float) -> bool:
        """Pump output until the command ends; True when it had to be stopped for time."""
        exited = run.until(deadline, lambda: run.proc.poll() is not None)
        if not exited:
            run.terminate()
        drain_until = time.monotonic() + (EXIT_DRAIN_SECONDS if exited else KILL_GRACE_SECONDS)
        if not run.until(drain_until, run.finished):
            # Leftover background children still hold the output pipe: stop them too.
            _signal_group(run.pgid, signal.SIGKILL)
            run.until(time.monotonic() + KILL_GRACE_SECONDS, run.finished)
        return not exited


def _feed_stdin(proc: subprocess.Popen[bytes], text: str) -> None:
    """Write stdin from a thread so a command that prints before reading cannot deadlock."""

    def write() -> None:
        assert proc.stdin is not None
        with contextlib.suppress(OSError):
            proc.stdin.write(text.encode("utf-8"))
        with contextlib.suppress(OSError):
            proc.stdin.close()

    threading.Thread(target=write, name="command-stdin", daemon=True).start()


def build_runner(settings: Settings) -> CommandRunner:
    """The runner AGENT_SANDBOX asks for: `docker`, `local`, or `auto` (Docker when an engine
    answers and the image is present, else local). Local uses bubblewrap when it works."""
    if settings.sandbox in ("auto", "docker"):
        from modules.docker_sandbox import docker_runner

        runner = docker_runner(settings, required=settings.sandbox == "docker")
        if runner is not None:
            return runner
    confinement = detect_confinement(settings.local_sandbox, settings.workspace)
    runner = LocalRunner(settings, confinement)
    log.info(
        "sandbox chosen",
        extra={"fields": {"kind": runner.kind, "isolation": runner.isolation}},
    )
    return runner
