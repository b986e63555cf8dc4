"""The undo baseline: the index and blob store filled before the first command, by a child.

In a workspace the index does not know yet (its first use, or after many files changed while
no process ran), the first command would wait while every unknown file is read and copied:
seconds in a big workspace. So when a front opens the workspace (the web server before it
listens, the interactive CLI while the first prompt is typed), `Baseline.start` runs
`python -m modules.undo.journal DATA_DIR WORKSPACE FLOOR_BYTES FLOOR_PERCENT`: a child process
that takes an exclusive flock on DATA_DIR/undo and then does what a snapshot does, keeping every
path the index lacks (within the disk floor) and writing the index as it goes, in at most
BASELINE_MEMORY_BYTES of address space (a workspace a task filled with files is walked whole).
Before its scan, a snapshot waits (at most WAIT_SECONDS) while this process's child runs or any
process holds that lock, then reads the index again; whatever is still unknown it keeps itself,
so undo never depends on the child having finished or run at all. Two processes opening one
workspace build it once: the second child waits for the lock, then finds nothing left to keep.
"""

from __future__ import annotations

import fcntl
import logging
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import IO

from modules.sandbox.disk_floor import Floor
from utils.settings import PROGRAM_DIR

log = logging.getLogger(__name__)

WAIT_SECONDS = 30.0  # well within a command's own time limit
BASELINE_MEMORY_BYTES = 2 * 1024 * 1024 * 1024  # ~300 B a workspace path, a 1 MB file read whole
_POLL_SECONDS = 0.01
_STOP_SECONDS = 5.0
_ERROR_TAIL = 2000


class Baseline:
    """The baseline child of one journal: start it, wait for any builder, stop it."""

    def __init__(self, data_dir: Path, workspace: Path, floor: Floor) -> None:
        self.data_dir = data_dir
        self.workspace = workspace
        self.floor = floor
        self.lock_dir = data_dir / "undo"
        self._child: subprocess.Popen[bytes] | None = None
        self._stopped = False  # a warm-up that comes after close starts nothing
        self._mutex = threading.Lock()

    def start(self) -> None:
        """Start building in a child process, unless this journal's child is at it already or
        the journal was closed."""
        with self._mutex:
            if self._stopped or (self._child is not None and self._child.poll() is None):
                return
            argv = [
                sys.executable,
                "-m",
                "modules.undo.journal",
                str(self.data_dir),
                str(self.workspace),
                str(self.floor.floor_bytes),
                str(self.floor.percent),
            ]
            try:
                self.lock_dir.mkdir(parents=True, exist_ok=True)
                errors = tempfile.TemporaryFile()  # noqa: SIM115  (closed by _reap)
                child = subprocess.Popen(
                    argv,
                    cwd=PROGRAM_DIR,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=errors,
                    start_new_session=True,  # a terminal's Ctrl-C is the server's to handle
                )
            except OSError as exc:  # then the first command keeps what it needs itself
                log.warning(
                    "the undo baseline could not be started", extra={"fields": {"error": str(exc)}}
                )
                return
            self._child = child
        threading.Thread(
            target=self._reap, args=(child, errors), name="undo-baseline", daemon=True
        ).start()

    def wait(self, timeout: float = WAIT_SECONDS) -> None:
        """Until no baseline is being built, by this process's child or any other process;
        past `timeout` seconds the caller goes on (and keeps what it needs itself)."""
        started = time.monotonic()
        while self.busy():
            if time.monotonic() - started > timeout:
                log.warning(
                    "the undo baseline is still being built; going on without it",
                    extra={"fields": {"waited_s": round(timeout, 1)}},
                )
                return
            time.sleep(_POLL_SECONDS)  # a green sleep under eventlet: the hub runs meanwhile
        waited = time.monotonic() - started
        if waited > _POLL_SECONDS:
            log.info(
                "waited for the undo baseline", extra={"fields": {"waited_s": round(waited, 3)}}
            )

    def busy(self) -> bool:
        """Whether a baseline is being built now, by this process's child or another."""
        child = self._child
        return (child is not None and child.poll() is None) or self._locked()

    def stop(self) -> None:
        """Stop this process's child, if it still runs (what it kept so far stays kept); no
        child starts after this."""
        with self._mutex:
            self._stopped = True
            child = self._child
        if child is None or child.poll() is not None:
            return
        child.terminate()
        try:
            child.wait(_STOP_SECONDS)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()

    def _reap(self, child: subprocess.Popen[bytes], errors: IO[bytes]) -> None:
        """Wait for the child (so it never lingers as a zombie); log it if it failed."""
        with errors:
            code = child.wait()
            if code > 0:  # a negative code: stopped by `stop`, on purpose
                errors.seek(0)
                tail = errors.read().decode("utf-8", "replace")[-_ERROR_TAIL:]
                log.warning(
                    "the undo baseline failed",
                    extra={"fields": {"exit_code": code, "stderr": tail}},
                )

    def _locked(self) -> bool:
        """Whether some process holds the baseline lock now."""
        try:
            fd = os.open(self.lock_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        except OSError:  # a file system without flock: no builder can hold it either
            return False
        finally:
            os.close(fd)  # and with it the shared lock just taken
        return False
