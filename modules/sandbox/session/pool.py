"""The sessions of this server process: one per conversation, made on first use, ended when
idle for AGENT_SESSION_IDLE_MINUTES, when the conversation is deleted, and all of them when the
server stops. One housekeeping thread ends idle sessions and watches the running background
processes (their ports, and process sessions that emptied unseen)."""

from __future__ import annotations

import contextlib
import logging
import re
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from modules.sandbox.disk_floor import DiskFloor
from modules.sandbox.runner import SandboxUnavailable
from modules.sandbox.session.launcher import SessionLauncher
from modules.sandbox.session.os_threads import new_condition, start_thread, wait_for
from modules.sandbox.session.process import ProcessEvent, ProcessInfo, SessionConfig
from modules.sandbox.session.records import (
    INDEX_NAME,
    PROCESSES_DIR,
    EndReason,
    ProcessIndex,
    ProcessRecord,
    processes_folder,
)
from modules.sandbox.session.session import SandboxSession
from modules.sandbox.session.supervised import END_GRACE_SECONDS, SupervisedSandbox
from utils.settings import Settings

log = logging.getLogger(__name__)

CONVERSATION_ID = re.compile(r"[A-Za-z0-9_-]{1,128}")
FAST_POLL_SECONDS = 0.5  # a background process's ports, in its first minute
SLOW_POLL_SECONDS = 2.0  # and after it
FAST_POLL_FOR_SECONDS = 60.0


class SessionPool:
    """One SandboxSession per conversation id in this process."""

    def __init__(
        self,
        settings: Settings,
        launcher: SessionLauncher,
        ends_with_process: bool = False,
    ) -> None:
        self.settings = settings
        self.launcher = launcher
        self.disk_floor = DiskFloor(settings)
        self.ends_with_process = ends_with_process  # `cli -p`: sessions end with this run
        self.listeners: list[Callable[[ProcessEvent], None]] = []
        self.relayed = False  # a relay sends every output (core/process_relay.py)
        self._changed = new_condition()
        self._sessions: dict[str, SandboxSession] = {}
        self._starting: set[str] = set()
        self._ports: dict[str, dict[str, tuple[int, ...]]] = {}
        self._polled: dict[str, float] = {}
        self._closed = False
        self._thread: Any = None

    def session(self, conversation_id: str) -> SandboxSession:
        """The conversation's session, started now when it has none (SandboxUnavailable when
        its sandbox cannot start)."""
        if not CONVERSATION_ID.fullmatch(conversation_id):
            raise ValueError(f"not a conversation id: {conversation_id[:40]!r}")
        while True:  # another thread may be starting it: wait for that one
            wait_for(self._changed, lambda: conversation_id not in self._starting, None)
            with self._changed:
                if conversation_id in self._starting:
                    continue
                found = self._sessions.get(conversation_id)
                if found is not None and not found.ended:
                    found.sandbox.touch()  # in use again: not to be ended idle now
                    return found
                if self._closed:
                    raise SandboxUnavailable("the server is stopping: no command starts now")
                self._starting.add(conversation_id)
                break
        try:
            made = self._start(conversation_id)
        finally:
            with self._changed:
                self._starting.discard(conversation_id)
                self._changed.notify_all()
        with self._changed:
            self._sessions[conversation_id] = made
            if self._thread is None:
                self._thread = start_thread(self._housekeep, "session-housekeeping")
        return made

    def existing(self, conversation_id: str) -> SandboxSession | None:
        """The conversation's session when it has a live one here."""
        with self._changed:
            found = self._sessions.get(conversation_id)
        return found if found is not None and not found.ended else None

    def history(self, conversation_id: str) -> list[ProcessRecord]:
        """The conversation's processes as its index keeps them, those whose server stopped
        ended as `server_stopped` first (for a conversation with no session here)."""
        found = self.existing(conversation_id)
        if found is not None:
            return [info.record for info in found.processes()]
        with self._changed:  # no session starts meanwhile: the index is ours alone
            index = ProcessIndex(self._folder(conversation_id))
            if not self._has_session(conversation_id):
                index.end_stale()
                self._tell_ended(conversation_id, index.take_untold("page"))
        return list(index.records.values())

    def end_stale(self) -> None:
        """End as `server_stopped` the processes a stopped server left marked running, in
        every conversation with no session here (as this server starts), telling the
        listeners (an `exited` event each)."""
        for folder in sorted((self.settings.data_dir / PROCESSES_DIR).glob("*")):
            if CONVERSATION_ID.fullmatch(folder.name) and (folder / INDEX_NAME).is_file():
                self.history(folder.name)

    def take_untold(self, conversation_id: str) -> list[ProcessRecord]:
        """The processes that ended with a stopped server and the model is yet to be told of;
        from now on it has been (a task of the conversation begins)."""
        self.history(conversation_id)  # what a server that stopped since left, ended first
        found = self.existing(conversation_id)
        if found is not None:
            with found.sandbox.changed:
                return found.sandbox.index.take_untold("model")
        with self._changed:
            if self._has_session(conversation_id):
                return []  # its session begins now: the next task is told
            return ProcessIndex(self._folder(conversation_id)).take_untold("model")

    def _has_session(self, conversation_id: str) -> bool:
        """Whether the conversation's session lives or starts (holding the lock)."""
        found = self._sessions.get(conversation_id)
        return conversation_id in self._starting or (found is not None and not found.ended)

    def end(self, conversation_id: str, reason: EndReason) -> None:
        """End the conversation's session, if it has one (its processes end for `reason`)."""
        with self._changed:
            found = self._sessions.pop(conversation_id, None)
        if found is not None:
            found.sandbox.close(reason)

    def delete(self, conversation_id: str) -> None:
        """The conversation is deleted: its session ends (`conversation_deleted`) and what was
        kept of its processes (index, logs) goes."""
        self.end(conversation_id, "conversation_deleted")
        if CONVERSATION_ID.fullmatch(conversation_id):
            shutil.rmtree(self._folder(conversation_id), ignore_errors=True)

    def close(self) -> None:
        """The server stops: SIGTERM to every process of every session, a grace, then every
        sandbox ends with what is left in it."""
        with self._changed:
            self._closed = True
            sessions = list(self._sessions.values())
            self._sessions.clear()
            self._changed.notify_all()
        for found in sessions:
            found.sandbox.begin_close("server_stopped")
        deadline = time.monotonic() + END_GRACE_SECONDS
        for found in sessions:
            found.sandbox.finish_close(deadline)

    def _start(self, conversation_id: str) -> SandboxSession:
        config = SessionConfig(
            conversation_id=conversation_id,
            folder=self._folder(conversation_id),
            environment=self.launcher.environment(),
            rlimits=self.launcher.rlimits(),
            output_limit=self.settings.output_limit_chars,
            max_processes=self.settings.max_processes,
            settle_seconds=self.settings.process_settle_seconds,
            disk_floor=self.disk_floor,
            memory_mb=self.launcher.memory_mb,
            relayed=self.relayed,
        )
        sandbox = SupervisedSandbox.start(config, self.launcher, self._emit)
        with sandbox.changed:  # those its index ended as stale, and any a server stopping ended
            untold = sandbox.index.take_untold("page")
        self._tell_ended(conversation_id, untold)
        return SandboxSession(sandbox, self.launcher.kind, self.ends_with_process)

    def _folder(self, conversation_id: str) -> Path:
        return processes_folder(self.settings.data_dir, conversation_id)

    def _tell_ended(self, conversation_id: str, records: list[ProcessRecord]) -> None:
        for record in records:
            self._emit(ProcessEvent(conversation_id, record.id, "exited", ProcessInfo(record)))

    def _emit(self, event: ProcessEvent) -> None:
        for listener in list(self.listeners):
            try:
                listener(event)
            except Exception:
                log.exception("a process listener failed")

    # --- housekeeping ---------------------------------------------------------------------

    def _housekeep(self) -> None:
        idle = self.settings.session_idle_minutes * 60
        while True:
            with self._changed:
                self._changed.wait_for(lambda: self._closed, FAST_POLL_SECONDS)
                if self._closed:
                    return
                sessions = list(self._sessions.items())
            for conversation_id, found in sessions:
                try:
                    self._look_at(conversation_id, found, idle)
                except Exception:  # one session's trouble must not stop the others' care
                    log.exception("looking after a sandbox session failed")

    def _look_at(self, conversation_id: str, found: SandboxSession, idle: float) -> None:
        sandbox = found.sandbox
        if found.ended:
            with self._changed:
                if self._sessions.get(conversation_id) is found:
                    del self._sessions[conversation_id]
            return
        if sandbox.idle_seconds() > idle:
            with self._changed:  # asked for meanwhile, it stays
                if (
                    sandbox.idle_seconds() <= idle
                    or self._sessions.get(conversation_id) is not found
                ):
                    return
                del self._sessions[conversation_id]
            log.info("an idle sandbox session ends", extra={"fields": {
                "conversation_id": conversation_id}})  # fmt: skip
            sandbox.close("session_idle")
            return
        sandbox.flush_logs()  # what a log held back reaches the disk at the latest here
        running = sandbox.running()
        if not running:
            return
        now = time.monotonic()
        young = any(now - p.started < FAST_POLL_FOR_SECONDS for p in running)
        every = FAST_POLL_SECONDS if young else SLOW_POLL_SECONDS
        if now - self._polled.get(conversation_id, 0.0) < every:
            return
        self._polled[conversation_id] = now
        self._sweep(sandbox)
        self._poll_ports(conversation_id, sandbox)

    @staticmethod
    def _sweep(sandbox: SupervisedSandbox) -> None:
        """End the background processes whose process sessions emptied unseen (their last
        member reaped by a parent of another session)."""
        with contextlib.suppress(OSError):
            live = {entry["sid"] for entry in sandbox.procs()}
            sandbox.forget_sids_not_in(live)

    def _poll_ports(self, conversation_id: str, sandbox: SupervisedSandbox) -> None:
        try:
            ports = sandbox.ports()
        except OSError:
            return
        seen = self._ports.setdefault(conversation_id, {})
        for proc in sandbox.running():
            assert proc.record is not None
            now = tuple(sorted({p.port for p in ports if p.sid in proc.sids}))
            if seen.get(proc.record.id, ()) != now:
                seen[proc.record.id] = now
                info = sandbox.info(proc, now)
                self._emit(ProcessEvent(conversation_id, proc.record.id, "ports", info))
