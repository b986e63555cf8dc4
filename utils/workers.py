"""A Python module run as a child process over data that may be hostile (an uploaded document,
a database a task wrote): the child bounds its own memory and CPU time (`limit_self`) before it
touches the data, the parent its wall time; the child's environment holds no key or token.
Given a confinement (modules/sandbox/worker_jail.py), it runs inside it."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import threading
from collections.abc import Callable, Collection, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass


@dataclass(frozen=True)
class Finished:
    """How a worker ended: its exit code (negative: a signal), what it wrote, and whether the
    parent killed it for taking too long."""

    returncode: int
    stdout: bytes
    stderr: bytes
    overdue: bool


@dataclass(frozen=True)
class Confined:
    """A worker's argv as its confinement runs it, the fds its start must pass on, and whether
    its exit code gives a signal as 128 + the signal's number (as a wrapper's does)."""

    argv: list[str]
    fds: tuple[int, ...] = ()
    signal_as_code: bool = False


# Wraps a worker's argv, given the fds it is passed, for as long as its start takes (an fd of
# the wrapper's own may close after).
Confine = Callable[[list[str], tuple[int, ...]], AbstractContextManager[Confined]]


def run_worker(
    module: str,
    args: list[str],
    data: bytes,
    seconds: float,
    *,
    pass_fds: Collection[int] = (),
    confine: Confine | None = None,
) -> Finished:
    """Run `python -m module *args` with `data` on its stdin, inside `confine` when given;
    killed after `seconds`. A signal that ended it is a negative exit code."""
    from utils.settings import PROGRAM_DIR  # not at the top: workers import limit_self

    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
    }
    argv = [sys.executable, "-m", module, *args]
    passed = tuple(pass_fds)
    with confine(argv, passed) if confine else nullcontext(Confined(argv)) as confined:
        child = subprocess.Popen(
            confined.argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=PROGRAM_DIR,
            env=env,
            pass_fds=(*passed, *confined.fds),
            start_new_session=True,  # a terminal's Ctrl-C is the server's to handle
        )
    with killed_after(child, seconds) as overdue:
        stdout, stderr = child.communicate(data)
    code = child.returncode
    if confined.signal_as_code and code > 128:
        code = 128 - code
    return Finished(code, stdout, stderr, overdue.is_set())


@contextmanager
def killed_after(child: subprocess.Popen[bytes], seconds: float) -> Iterator[threading.Event]:
    """Kills `child` if the block still runs after `seconds`; the event says whether it did.
    A timer, not a wait's timeout: under eventlet the green subprocess raises a TimeoutExpired
    class that `subprocess.TimeoutExpired` is not."""
    overdue = threading.Event()

    def kill() -> None:
        overdue.set()
        child.kill()

    timer = threading.Timer(seconds, kill)
    timer.start()
    try:
        yield overdue
    finally:
        timer.cancel()


def limit_self(memory_bytes: int, cpu_seconds: int | None) -> None:
    """In the worker, first thing: its address space, CPU time (None: a child that lives as
    long as the server, such as the file watcher, has none) and no core dump."""
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    if cpu_seconds is not None:
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 1))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
