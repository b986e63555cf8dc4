"""One thread that keeps every watched group of processes (a command, later a session's
processes) above the disk floor: it polls statvfs and stops a group whose file systems fell
below their floor.

It polls as often as the room left needs: a writer at FASTEST_WRITE bytes a second cannot use
up the room above the floor before the next look, so a disk far from its floor is looked at
twice a second and one close to it every MIN_POLL_SECONDS. A statvfs costs a few microseconds.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path

from modules.sandbox.disk_floor import MB, DiskFloor, Shortage, Usage, usage_of

log = logging.getLogger(__name__)

FASTEST_WRITE = 4 * 1024**3  # bytes a second: page-cache writes of a fast machine
MIN_POLL_SECONDS = 0.005
MAX_POLL_SECONDS = 0.5


class Watch:
    """One watched group: `stop` is called once, from the watcher's thread, if a file system
    of its floor falls below it; never after close() has returned."""

    def __init__(self, watcher: DiskWatcher, floor: DiskFloor, stop: Callable[[], None]) -> None:
        self.floor = floor
        self.shortage: Shortage | None = None
        self._watcher = watcher
        self._stop = stop
        self._lock = threading.Lock()
        self._closed = False

    def trip(self, shortage: Shortage) -> bool:
        """Stop the group for `shortage`, unless it ended already; True when stopped."""
        with self._lock:
            if self._closed or self.shortage is not None:
                return False
            self.shortage = shortage
            self._stop()
            return True

    def close(self) -> None:
        """Stop watching; once this returns, `stop` is not called any more."""
        self._watcher.forget(self)
        with self._lock:
            self._closed = True


class DiskWatcher:
    """Polls the file systems of every open watch from one thread, started when first needed
    and idle (not polling) while nothing is watched."""

    def __init__(self) -> None:
        self._watches: set[Watch] = set()
        self._changed = threading.Condition()
        self._added = False
        self._thread: threading.Thread | None = None

    def watch(self, floor: DiskFloor, stop: Callable[[], None]) -> Watch:
        """Watch a group of processes against `floor`; close the Watch when the group ends."""
        watch = Watch(self, floor, stop)
        if not floor.active:
            return watch
        with self._changed:
            self._watches.add(watch)
            self._added = True
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="disk-watch", daemon=True)
                self._thread.start()
            self._changed.notify()
        return watch

    def forget(self, watch: Watch) -> None:
        """No longer look at `watch`'s file systems for it."""
        with self._changed:
            self._watches.discard(watch)

    def _run(self) -> None:
        while True:
            with self._changed:
                self._changed.wait_for(lambda: self._watches)
                watches = list(self._watches)
                self._added = False
            try:
                wait = self._look(watches)
            except Exception:  # the one watcher of every command must outlive any error
                log.exception("the disk watcher failed to look; trying again")
                wait = MAX_POLL_SECONDS
            with self._changed:
                self._changed.wait_for(lambda: self._added, wait)

    def _look(self, watches: list[Watch]) -> float:
        """Measure each file system once, stop the groups below a floor; the next wait."""
        paths = {place.path for watch in watches for place in watch.floor.places}
        usages: dict[Path, Usage | None] = {path: usage_of(path) for path in paths}
        least: int | None = None
        for watch in watches:
            shortage, room = watch.floor.judge(usages)
            if shortage is not None:
                self.forget(watch)
                if watch.trip(shortage):
                    _log_stop(shortage)
            elif room is not None:
                least = room if least is None else min(least, room)
        if least is None:
            return MAX_POLL_SECONDS
        return min(MAX_POLL_SECONDS, max(MIN_POLL_SECONDS, least / FASTEST_WRITE))


def _log_stop(shortage: Shortage) -> None:
    fields = {"path": str(shortage.place.path), "free_mb": shortage.free // MB,
              "floor_mb": shortage.floor // MB}  # fmt: skip
    log.warning("stopped a command: its disk fell below the floor", extra={"fields": fields})


WATCHER = DiskWatcher()
