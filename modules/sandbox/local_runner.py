"""The local runner: each command a subprocess in its own process group, limited and confined."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Unpack

from modules.sandbox.confinement import Confinement, plain, seccomp_pipe
from modules.sandbox.disk_floor import DiskFloor, Shortage
from modules.sandbox.disk_watch import WATCHER
from modules.sandbox.environment import command_environment
from modules.sandbox.output import OutputReader
from modules.sandbox.resource_limits import ResourceLimits
from modules.sandbox.runner import CommandResult, RunOptions, SandboxUnavailable, finished
from utils.cancel import CancelToken
from utils.settings import Settings

KILL_GRACE_SECONDS = 1.0  # between SIGTERM and SIGKILL on timeout
EXIT_DRAIN_SECONDS = 0.5  # after the command exits, how long leftover children may hold its output


def environment_line(settings: Settings) -> str:
    """The isolation list's line on what a command's environment holds."""
    names = ", ".join(settings.command_env)
    named = f", and of AGENT_COMMAND_ENV: {names}" if names else ""
    return (
        "environment: only PATH, HOME, USER, SHELL, TERM, TZ and the locale of this server's"
        f"{named}; never a key or token of ours"
    )


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _group_alive(pgid: int) -> bool:
    """True while a live (not zombie) process remains in the group."""
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    try:
        pids = [name for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return True
    # Orphaned members become zombies until init reaps them, which can take seconds. A process
    # may vanish while we look: its files then raise, and it is not alive.
    for pid in pids:
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = Path("/proc", pid, "stat").read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) == pgid and fields[0] != "Z":
                return True
    return False


class _Run:
    """One running command: its process group, its output pipe and its deadlines."""

    def __init__(self, proc: subprocess.Popen[bytes], limit: int, on_output: Callable[[str], None]):
        self.proc = proc
        self.pgid = proc.pid  # start_new_session makes the child its group's leader
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        os.set_blocking(fd, False)
        self.output = OutputReader(fd, lambda size: os.read(fd, size), limit, on_output)

    def finished(self) -> bool:
        return self.output.eof and self.proc.poll() is not None

    def terminate(self) -> None:
        """SIGTERM the whole group, then SIGKILL whatever is left after the grace."""
        _signal_group(self.pgid, signal.SIGTERM)

        def group_gone() -> bool:
            self.proc.poll()
            return not _group_alive(self.pgid)

        self.output.until(time.monotonic() + KILL_GRACE_SECONDS, group_gone)
        _signal_group(self.pgid, signal.SIGKILL)

    def close(self) -> None:
        if self.proc.poll() is None:
            _signal_group(self.pgid, signal.SIGKILL)
        self.output.close()
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
        self.disk_floor = DiskFloor(settings)
        self.kind = self.confinement.kind
        self.isolation = list(self.confinement.isolation)
        if self.confinement.refusal is None:
            self.isolation += [*self.limits.describe(), self.disk_floor.describe()]
            self.isolation.append(environment_line(settings))
        self.python = sys.executable

    def close(self) -> None:
        """Nothing to release: every command's processes are gone when it returns."""

    def run(self, argv: list[str], **options: Unpack[RunOptions]) -> CommandResult:
        """Run `argv` to completion, timeout or cancellation; output streamed and capped."""
        cancel, stdin = options["cancel"], options.get("stdin")
        cancel.raise_if_cancelled()
        if self.confinement.refusal is not None:
            raise SandboxUnavailable(self.confinement.refusal)
        self.disk_floor.refuse_if_short()
        started = time.monotonic()
        with self.limits.applied() as limits:
            proc = self._spawn(argv, options["cwd"], stdin is not None, limits.preexec)
            run = _Run(proc, self.settings.output_limit_chars, options["on_output"])
            deadline = started + options["timeout"]
            timed_out, shortage = self._supervise(run, stdin, deadline, cancel)
            note = shortage.stop_note() if shortage is not None else limits.note()
        ended = (None if timed_out else proc.returncode), timed_out
        return finished(argv, self.kind, started, cancel, ended, run.output.buffer, note)

    def _spawn(
        self, argv: list[str], cwd: Path, with_stdin: bool, preexec: Callable[[], None]
    ) -> subprocess.Popen[bytes]:
        """Start the confined command as the leader of a new session and process group."""
        seccomp_fd = seccomp_pipe(self.confinement.seccomp)
        try:
            return subprocess.Popen(
                self.confinement.wrap(argv, self.settings.workspace, cwd, seccomp_fd),
                cwd=cwd,
                env=command_environment(self.settings),
                stdin=subprocess.PIPE if with_stdin else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=preexec,  # resource limits; it makes only system calls
                pass_fds=() if seccomp_fd is None else (seccomp_fd,),
            )
        finally:
            if seccomp_fd is not None:
                os.close(seccomp_fd)

    def _supervise(
        self, run: _Run, stdin: str | None, deadline: float, cancel: CancelToken
    ) -> tuple[bool, Shortage | None]:
        """Wait for the command, its whole group killed on cancel or at the disk floor;
        whether time ran out, and the shortage that stopped it."""

        def kill() -> None:
            _signal_group(run.pgid, signal.SIGKILL)

        unregister = cancel.on_cancel(kill)
        watch = WATCHER.watch(self.disk_floor, kill)
        try:
            if stdin is not None:
                _feed_stdin(run.proc, stdin)
            timed_out = self._wait(run, deadline)
        finally:
            watch.close()
            unregister()
            run.close()
        return timed_out, watch.shortage

    def _wait(self, run: _Run, deadline: float) -> bool:
        """Pump output until the command ends; True when it had to be stopped for time."""
        output = run.output
        exited = output.until(deadline, lambda: run.proc.poll() is not None)
        if not exited:
            run.terminate()
        drain_until = time.monotonic() + (EXIT_DRAIN_SECONDS if exited else KILL_GRACE_SECONDS)
        if not output.until(drain_until, run.finished):
            # Leftover background children still hold the output pipe: stop them too.
            _signal_group(run.pgid, signal.SIGKILL)
            output.until(time.monotonic() + KILL_GRACE_SECONDS, run.finished)
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
