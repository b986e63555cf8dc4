"""The sandbox sessions' process changes as `process` events on each conversation's timeline:
started, ports and exited as they come, output gathered per process (at most BATCH_BYTES an
event: what came in BATCH_SECONDS, the first after a quiet while at once, and at once while a
backlog remains or a full batch waits, one batch per process a round; while a client of the
conversation is far behind, nothing more until it catches up, looking every
HELD_LOOK_SECONDS). The pool's sessions hold a process's output in its pipe while too much of
it was not sent yet (ProcessOutput), so none is lost to the ring, and a process flooding a
slow client waits on its writes. One thread for the whole server (a Socket.IO background task,
green under eventlet): the sessions' OS threads only note a change under a real lock, which
wakes the relay on an OS thread; a green one looks every BATCH_SECONDS, less often idle."""

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
from utils.async_loop import green_threads

log = logging.getLogger(__name__)

BATCH_SECONDS = 0.05
HELD_LOOK_SECONDS = 0.005  # how often output a slow client holds back is looked at again
BATCH_BYTES = 256 * 1024
IDLE_SECONDS = 0.25  # how often it looks after a second with nothing to send
FLOOD_SECONDS = 0.002  # how often a green relay looks for a flood's next batch
MAX_CUT_BYTES = 3  # the most a batch leaves of a character the output's end cuts short

Deliver = Callable[[str, Process], None]  # (conversation id, event): onto its timeline
KeepingUp = Callable[[str], bool]  # whether the conversation's clients may be sent more now


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
        keeping_up: KeepingUp,
        start: Callable[[Callable[[], None]], Any],
        sleep: Callable[[float], None],
    ) -> None:
        self.pool = pool
        self.deliver = deliver
        self.keeping_up = keeping_up
        self._sleep = sleep
        threading = original("threading")  # real: the sessions' OS threads take it
        self._lock = threading.Condition(threading.Lock())  # notified of each change
        self._green = green_threads()  # then the relay cannot wait on it, and looks instead
        self._sent: dict[tuple[str, str], int] = {}  # the offset output was sent up to
        self._waiting: set[tuple[str, str]] = set()  # output to send
        self._changes: list[ProcessEvent] = []  # started, ports, exited: to send in order
        self._held: set[tuple[str, str]] = set()  # output a slow client holds back (relay's own)
        self._held_ends: list[ProcessEvent] = []  # `exited` held behind such output
        self._closed = False
        self._flooded = False  # the last batch sent was full: more may come any moment
        self._batch_waits = False  # a full batch of output waits: no reason to gather more
        self._holding = False  # the last round held output back for a slow client
        pool.listeners.append(self.on_event)
        pool.relayed = True
        pool.end_stale()  # what a stopped server left running: an `exited` event each
        start(self._run)

    def on_event(self, event: ProcessEvent) -> None:
        """Note a change (output is sent with the next batch)."""
        with self._lock:
            if event.phase == "output":
                key = (event.conversation_id, event.process_id)
                self._waiting.add(key)
                if (event.offset or 0) - self._sent.get(key, 0) >= BATCH_BYTES:
                    self._batch_waits = True
            else:
                self._changes.append(event)
            self._lock.notify()

    def close(self) -> None:
        """Stop relaying (the server stops)."""
        with contextlib.suppress(ValueError):
            self.pool.listeners.remove(self.on_event)
        with self._lock:
            self._closed = True
            self._lock.notify()

    def _run(self) -> None:
        last = 0.0  # when it last sent
        backlog: set[tuple[str, str]] = set()  # more to send than its last batch took
        while not self._closed:
            if backlog:
                if self._green:  # the other green threads' turn (an OS thread is preempted)
                    self._sleep(0)
            elif not self._wait(last):
                if time.monotonic() - last > 1.0:
                    self._forget_ended_sessions()
                continue
            with self._lock:
                waiting, self._waiting = self._waiting | backlog, set()
                self._batch_waits = False
                changes, self._changes = self._held_ends + self._changes, []
            last, self._flooded, self._holding = time.monotonic(), False, False
            self._held_ends = []
            try:
                backlog = self._send_all(waiting, changes)
            except Exception:  # one process's trouble must not stop the others'
                log.exception("relaying a process's events failed")
                backlog = set()
            if self._held:  # looked at again after HELD_LOOK_SECONDS
                with self._lock:
                    self._waiting |= self._held
                self._held, self._holding = set(), True

    def _wait(self, last: float) -> bool:
        """Whether something is due now; else wait a while (an OS thread: until a change). A
        green relay gives the other green threads their turn every round."""
        with self._lock:
            pause = self._pause(time.monotonic() - last)
            if not self._green:
                if pause > 0:
                    self._lock.wait(pause)
                return pause <= 0
        self._sleep(max(0.0, pause))
        return pause <= 0

    def _pause(self, quiet: float) -> float:
        """How long until what waits is due, `quiet` seconds after the last send (holding the
        lock): changes at once; output BATCH_SECONDS after the last batch, at once after a
        full one; with nothing waiting, how long until a green relay looks again."""
        if self._changes:
            return 0.0
        if self._waiting:
            if self._flooded or self._batch_waits:
                return 0.0
            return (HELD_LOOK_SECONDS if self._holding else BATCH_SECONDS) - quiet
        if self._flooded and quiet < BATCH_SECONDS:
            return FLOOD_SECONDS
        return IDLE_SECONDS if quiet > 1.0 else BATCH_SECONDS

    def _send_all(
        self, waiting: set[tuple[str, str]], changes: list[ProcessEvent]
    ) -> set[tuple[str, str]]:
        """Send the changes, and a batch of each waiting output; those with more to send."""
        for change in changes:
            key = (change.conversation_id, change.process_id)
            if change.phase == "exited":
                while self._flush(key):  # its last output before its end
                    pass
                if key in self._held:  # and its end after it
                    self._held_ends.append(change)
                    continue
                waiting.discard(key)
            self._send(key, process_event(change.process_id, change.phase, change.info))
        # Of an ended one too: the pipe may be read after its exit.
        return {key for key in waiting if self._flush(key)}

    def _forget_ended_sessions(self) -> None:
        """Drop what was sent of the processes of sessions that ended."""
        live = {cid for cid, _ in self._sent if self.pool.existing(cid) is not None}
        self._sent = {key: sent for key, sent in self._sent.items() if key[0] in live}

    def _flush(self, key: tuple[str, str]) -> bool:
        """Send a batch of its output not sent yet; whether more may follow at once."""
        conversation_id, process_id = key
        session = self.pool.existing(conversation_id)
        if session is None:
            return False
        if not self.keeping_up(conversation_id):
            self._held.add(key)
            return False
        offset = self._sent.get(key, 0)
        try:
            out = session.peek(process_id, offset, BATCH_BYTES)
        except UnknownProcess:
            self._sent.pop(key, None)
            return False
        if out.next_offset <= offset:
            return False
        self._sent[key] = out.next_offset
        event = Process(process_id=process_id, phase="output", delta=out.text)
        event.offset = offset + out.skipped
        event.skipped = out.skipped or None
        self._send(key, event)
        with contextlib.suppress(UnknownProcess):
            session.relay_sent(process_id, out.next_offset)
        full = out.next_offset - offset >= BATCH_BYTES - MAX_CUT_BYTES
        self._flooded = self._flooded or full
        return out.info.output_end - out.next_offset > MAX_CUT_BYTES

    def _send(self, key: tuple[str, str], event: Process) -> None:
        try:
            self.deliver(key[0], event)
        except Exception:
            log.exception("a process event could not be delivered")
