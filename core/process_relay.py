"""The sandbox sessions' process changes as `process` events on each conversation's timeline:
started, ports and exited as they come, output gathered per process (every BATCH_SECONDS, at
most BATCH_BYTES an event, with `skipped` when the ring overran the relay). One thread for the
whole server (a Socket.IO background task, green under eventlet: the sessions' OS threads only
note a change under a real lock, and the relay looks every BATCH_SECONDS, less often idle)."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any

from modules.sandbox.session.background import UnknownProcess
from modules.sandbox.session.os_threads import original
from modules.sandbox.session.pool import SessionPool
from modules.sandbox.session.process import ProcessEvent, ProcessInfo
from protocol.events import Process

log = logging.getLogger(__name__)

BATCH_SECONDS = 0.05
BATCH_BYTES = 64 * 1024
IDLE_SECONDS = 0.25  # how often it looks after a second with nothing to send

Deliver = Callable[[str, Process], None]  # (conversation id, event): onto its timeline


def process_event(process_id: str, phase: str, info: ProcessInfo | None) -> Process:
    """A `process` event of `phase` carrying what `info` says of the process."""
    event = Process(process_id=process_id, phase=phase)  # type: ignore[arg-type]
    if info is None:
        return event
    record = info.record
    if phase == "started":
        event.command, event.pid, event.origin = record.command, record.pid, record.origin
    if phase in ("ports", "started"):
        event.ports = list(info.ports)
    if phase == "exited":
        event.exit_code, event.signal, event.reason = (
            record.exit_code,
            record.signal,
            record.end_reason,
        )
    return event


class ProcessRelay:
    """Listens to a SessionPool; hands each change to `deliver` in the process's order, from
    its own thread (a listener is called holding a session's lock: it only notes the change).
    It begins with the processes a stopped server left marked running, ended now."""

    def __init__(
        self,
        pool: SessionPool,
        deliver: Deliver,
        start: Callable[[Callable[[], None]], Any],
        sleep: Callable[[float], None],
    ) -> None:
        self.pool = pool
        self.deliver = deliver
        self._sleep = sleep
        self._lock = original("threading").Lock()  # real: the sessions' OS threads take it
        self._sent: dict[tuple[str, str], int] = {}  # the offset output was sent up to
        self._waiting: set[tuple[str, str]] = set()  # output to send
        self._changes: list[ProcessEvent] = []  # started, ports, exited: to send in order
        self._closed = False
        pool.listeners.append(self.on_event)
        pool.end_stale()  # what a stopped server left running: an `exited` event each
        start(self._run)

    def on_event(self, event: ProcessEvent) -> None:
        """Note a change (output is sent with the next batch)."""
        with self._lock:
            if event.phase == "output":
                self._waiting.add((event.conversation_id, event.process_id))
            else:
                self._changes.append(event)

    def close(self) -> None:
        """Stop relaying (the server stops)."""
        with contextlib.suppress(ValueError):
            self.pool.listeners.remove(self.on_event)
        self._closed = True

    def _run(self) -> None:
        last = time.monotonic()
        while not self._closed:
            idle = time.monotonic() - last > 1.0
            self._sleep(IDLE_SECONDS if idle else BATCH_SECONDS)
            with self._lock:
                waiting, self._waiting = self._waiting, set()
                changes, self._changes = self._changes, []
            if not (waiting or changes):
                if idle:
                    self._forget_ended_sessions()
                continue
            last = time.monotonic()
            try:
                self._send_all(waiting, changes)
            except Exception:  # one process's trouble must not stop the others'
                log.exception("relaying a process's events failed")

    def _send_all(self, waiting: set[tuple[str, str]], changes: list[ProcessEvent]) -> None:
        for change in changes:
            key = (change.conversation_id, change.process_id)
            if change.phase == "exited":
                self._flush(key)  # its last output before its end
                waiting.discard(key)
            self._send(key, process_event(change.process_id, change.phase, change.info))
        for key in waiting:  # of an ended one too: the pipe may be read after its exit
            self._flush(key)

    def _forget_ended_sessions(self) -> None:
        """Drop what was sent of the processes of sessions that ended."""
        live = {cid for cid, _ in self._sent if self.pool.existing(cid) is not None}
        self._sent = {key: sent for key, sent in self._sent.items() if key[0] in live}

    def _flush(self, key: tuple[str, str]) -> None:
        """Send its output not sent yet, a batch at a time."""
        conversation_id, process_id = key
        session = self.pool.existing(conversation_id)
        if session is None:
            return
        while True:
            offset = self._sent.get(key, 0)
            try:
                out = session.peek(process_id, offset, BATCH_BYTES)
            except UnknownProcess:
                self._sent.pop(key, None)
                return
            if out.next_offset <= offset:
                return
            self._sent[key] = out.next_offset
            event = Process(process_id=process_id, phase="output", delta=out.text)
            event.offset = offset + out.skipped
            event.skipped = out.skipped or None
            self._send(key, event)

    def _send(self, key: tuple[str, str], event: Process) -> None:
        try:
            self.deliver(key[0], event)
        except Exception:
            log.exception("a process event could not be delivered")
