"""Where the document and SQL workers run: the children that parse what a task or an upload
brought (PDF, Office XML, SQLite) with C libraries, outside the sandbox of commands.

Where bubblewrap confines commands it confines them too, the same way (no capabilities, an
unprivileged uid when the server is root, no new privileges, the set-id seccomp filter, a PID
namespace, the system folders and the Python installation read-only), and further: no network
whatever the settings say, no workspace at all (the file comes on stdin, or as an fd the server
opened, bound read-only at a path of its own: SQLite resolves /proc/self/fd/N to the file's
name and opens that), and of the program only the code they import, read-only. Their memory
and CPU limits are their own (utils/workers.py). Without a usable bubblewrap they run as
before, unconfined.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from modules.sandbox.confinement import Bubblewrap, seccomp_pipe, usable_bubblewrap
from modules.sandbox.seccomp import setid_filter
from utils.settings import PROGRAM_DIR, LocalSandboxSettings
from utils.workers import Confine, Confined

log = logging.getLogger(__name__)

CODE = ("modules", "utils")  # what the workers import of the program
FILES = "/run/files"  # where a file passed as an fd is bound, by its number


@dataclass(frozen=True)
class WorkerJail:
    """bubblewrap's view for a worker, or none (`bubblewrap` None: the worker runs as is)."""

    bubblewrap: Bubblewrap | None = None
    seccomp: bytes | None = None

    def path_of(self, fd: int) -> str:
        """Where the worker finds the file open at `fd` (passed to it)."""
        return f"/proc/self/fd/{fd}" if self.bubblewrap is None else f"{FILES}/{fd}"

    @contextlib.contextmanager
    def confined(self, argv: list[str], files: tuple[int, ...] = ()) -> Iterator[Confined]:
        """`argv` as it runs in the jail, with the files open at `files` bound read-only where
        `path_of` says (utils.workers.Confine), for as long as it starts."""
        if self.bubblewrap is None:
            yield Confined(argv)
            return
        seccomp_fd = seccomp_pipe(self.seccomp)
        try:
            wrap = self.bubblewrap.worker_args(_readable(), PROGRAM_DIR, seccomp_fd)
            for fd in files:
                wrap += ["--ro-bind-fd", str(fd), self.path_of(fd)]
            fds = () if seccomp_fd is None else (seccomp_fd,)
            yield Confined([*wrap, "--", *argv], fds, signal_as_code=True)
        finally:
            if seccomp_fd is not None:
                os.close(seccomp_fd)


_found: dict[str, WorkerJail] = {}  # by the settings it was found for
_lock = threading.Lock()


def confine_workers(options: LocalSandboxSettings) -> Confine:
    """How a worker starts (utils.workers.Confine): in the jail, found at the first start."""
    return lambda argv, files: worker_jail(options).confined(argv, files)


def worker_jail(options: LocalSandboxSettings) -> WorkerJail:
    """The workers' jail on this machine, found once per process: bubblewrap when the settings
    allow it and it works here, else none."""
    key = options.model_dump_json()
    with _lock:
        if key not in _found:
            _found[key] = _detect(options)
        return _found[key]


def _detect(options: LocalSandboxSettings) -> WorkerJail:
    wrap = usable_bubblewrap(options, lambda wrap: wrap.worker_args(_readable(), PROGRAM_DIR))
    if wrap is None or not wrap.bind_fd:
        why = "not usable here" if wrap is None else "too old (no --ro-bind-fd, before 0.7)"
        log.warning(
            "document and SQL workers run unconfined", extra={"fields": {"bubblewrap": why}}
        )
        return WorkerJail()
    return WorkerJail(wrap, setid_filter())


def _readable() -> list[Path]:
    return [PROGRAM_DIR / name for name in CODE]
