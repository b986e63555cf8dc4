"""The server's side of one supervised sandbox (a conversation's session): its supervisor's
channel, the processes it runs (each in a process session `sid` of its own, so whatever a
process leaves behind stays its own), their output, their records, and the sandbox's end.

Foreground commands (foreground.py) and background processes (background.py) are built on
`spawn`, `signal`, `adopt` and the waits here; session.py is their one face."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import stat
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from modules.sandbox.disk_floor import Shortage
from modules.sandbox.disk_watch import WATCHER
from modules.sandbox.runner import SandboxUnavailable
from modules.sandbox.session.channel import Answer, ChannelClosed, SupervisorChannel, checked_fds
from modules.sandbox.session.launcher import Launched, SessionLauncher, log_tail
from modules.sandbox.session.os_threads import new_condition, original, wait_for
from modules.sandbox.session.output_store import Capture, ProcessOutput
from modules.sandbox.session.process import (
    Phase,
    Port,
    Proc,
    ProcessEvent,
    ProcessInfo,
    SessionConfig,
)
from modules.sandbox.session.pump import PUMP
from modules.sandbox.session.records import EndReason, ProcessIndex, ProcessRecord

log = logging.getLogger(__name__)

START_SECONDS = 15.0  # for a new sandbox's supervisor to answer its first ping
BACKGROUND_RATE = 4 * 1024 * 1024  # bytes a second an unrelayed background process is read at
END_GRACE_SECONDS = 2.0  # between SIGTERM and SIGKILL when a session ends
KEPT_ENDED = 20  # background processes that ended whose output stays in memory


class SessionEnded(SandboxUnavailable):
    """The session ended (idle, deleted, server stopping, or its sandbox died)."""


class _Sink:
    """The pump's side of one process's output."""

    def __init__(self, session: SupervisedSandbox, proc: Proc) -> None:
        self._session = session
        self._proc = proc

    @property
    def rate(self) -> int | None:
        return self._proc.rate

    def take(self, data: bytes) -> bool:
        return self._session.output_taken(self._proc, data)

    def ended(self) -> None:
        self._session.output_ended(self._proc)


class SupervisedSandbox:
    """A long-lived sandbox in which one conversation's commands and processes run."""

    def __init__(
        self, config: SessionConfig, launched: Launched, listener: Callable[[ProcessEvent], None]
    ) -> None:
        self.config = config
        self.conversation_id = config.conversation_id
        self.launched = launched
        self.index = ProcessIndex(config.folder)
        self.stale = self.index.end_stale()  # ended with the server that ran them
        self.listener = listener
        self.changed = new_condition()  # guards everything below, and the procs' outputs
        self.by_pid: dict[int, Proc] = {}  # spawned and not reaped
        self.by_sid: dict[int, Proc] = {}  # process sessions with live members
        self.background: dict[str, Proc] = {}  # by id: running, and the latest that ended
        self.closed = False  # the supervisor is gone
        self.released = False  # and what the session held (its cgroup) is too
        self.end_reason: EndReason | None = None
        self.last_activity = time.monotonic()
        self.busy = 0  # foreground commands running, and attached users (terminals, apps)
        self.shortage: Shortage | None = None
        self._oom_seen = self.oom_kills()
        self._watch = WATCHER.watch(config.disk_floor, lambda: self._stop_all("disk_floor"))
        self.channel = SupervisorChannel(
            launched.control, self._on_event, self._on_closed, config.conversation_id[:12]
        )

    @classmethod
    def start(
        cls,
        config: SessionConfig,
        launcher: SessionLauncher,
        listener: Callable[[ProcessEvent], None],
    ) -> SupervisedSandbox:
        """Start the sandbox and wait for its supervisor; SandboxUnavailable if it cannot
        (DiskFloorReached below the disk floor, where its watch would end it at once)."""
        config.disk_floor.refuse_if_short()
        log_path = config.folder / "sandbox.log"
        launched = launcher.launch(log_path)
        session = cls(config, launched, listener)
        try:
            session.channel.request("ping", timeout=START_SECONDS)
        except (ChannelClosed, OSError) as exc:
            session.close("session_ended")
            tail = log_tail(log_path)
            raise SandboxUnavailable(f"the sandbox session did not start: {exc}{tail}") from None
        log.info("sandbox session started", extra={"fields": {
            "conversation_id": config.conversation_id, "kind": launcher.kind}})  # fmt: skip
        return session

    # --- processes ------------------------------------------------------------------------

    def spawn(
        self,
        argv: list[str],
        cwd: Path,
        *,
        stdin: bool,
        capture: Capture | None = None,
        terminal: tuple[int, int] | None = None,
        pumped: bool = True,
    ) -> Proc:
        """Start `argv` in a process session of its own; its output is pumped from now on.
        With `terminal` (rows, columns) it runs on a PTY of its own, its controlling
        terminal: the master is its output, and a copy of it its input (Proc.stdin); not
        `pumped`, the master itself is Proc.stdin, read by the caller (a person's terminal)."""

        def register(answer: Answer) -> Proc:
            pid = answer.fields.get("pid")
            if not isinstance(pid, int) or pid < 2:
                answer.close()
                raise ChannelClosed("the supervisor answered a spawn without a pid")
            fds = checked_fds(answer, kinds)
            given = (
                (os.dup(fds[0]) if pumped else fds[0]) if terminal else (fds[0] if stdin else None)
            )
            proc = Proc(pid, ProcessOutput(capture), given, fds[-1], {pid})
            proc.sink = _Sink(self, proc)
            with self.changed:  # before any later message: its exit notice may be next
                self.by_pid[pid] = proc
                self.by_sid[pid] = proc
            if pumped or not terminal:
                PUMP.add(fds[-1], proc.sink)
            return proc

        kinds = [stat.S_IFCHR] if terminal else [stat.S_IFIFO] * (2 if stdin else 1)
        self.touch()
        environment = {**self.config.environment, **self.launched.environment}
        request = {"argv": argv, "cwd": self.launched.inside(cwd), "env": environment,
                   "rlimits": self.config.rlimits, "stdin": stdin}  # fmt: skip
        if terminal is not None:
            request["pty"] = {"rows": terminal[0], "cols": terminal[1]}
        proc: Proc = self._ask("spawn", then=register, **request).result
        return proc

    def signal(self, proc: Proc, sig: str) -> None:
        """Send `sig` (a name: TERM, KILL, INT, ...) to every process of `proc`'s sessions."""
        with self.changed:
            sids = sorted(proc.sids)
        for sid in sids:
            with contextlib.suppress(ChannelClosed, OSError):
                self._ask("signal", pid=sid, sig=sig, scope="session")

    def kill_sids(self, sids: set[int], sig: str = "KILL") -> None:
        for sid in sorted(sids):
            with contextlib.suppress(ChannelClosed, OSError):
                self._ask("signal", pid=sid, sig=sig, scope="session")

    def procs(self) -> list[dict[str, Any]]:
        """Every live process of the session: pid, ppid, pgid, sid, state, start, argv."""
        answer = self._ask("procs")
        listed = answer.fields.get("procs")
        valid = []
        for entry in listed if isinstance(listed, list) else []:
            if isinstance(entry, dict) and all(
                isinstance(entry.get(k), int) for k in ("pid", "pgid", "sid")
            ):
                argv = entry.get("argv")
                entry["argv"] = (
                    [a for a in argv if isinstance(a, str)] if isinstance(argv, list) else []
                )
                valid.append(entry)
        return valid

    def ports(self) -> list[Port]:
        """The TCP ports the session's processes listen on."""
        answer = self._ask("ports")
        found = []
        listed = answer.fields.get("ports")
        for entry in listed if isinstance(listed, list) else []:
            if not isinstance(entry, dict):
                continue
            port, host, pid, sid = (entry.get(k) for k in ("port", "host", "pid", "sid"))
            if not (isinstance(pid, int) and isinstance(sid, int) and isinstance(port, int)):
                continue
            if 0 < port < 65536 and isinstance(host, str):
                found.append(Port(port, host[:64], pid, sid))
        return found

    def connect(self, port: int, host: str = "127.0.0.1") -> Any:
        """A socket connected to `port` inside the session (the supervisor connected it)."""
        answer = self._ask("connect", port=port, host=host)
        (fd,) = checked_fds(answer, [stat.S_IFSOCK])
        return original("socket").socket(fileno=fd)

    def adopt(self, proc: Proc, sids: set[int], record: ProcessRecord) -> None:
        """`proc`'s foreground command ended and left `sids` running: they become the
        background process `record`, its output what they still write to the pipe."""
        with self.changed:
            self.by_pid.pop(proc.pid, None)
            for sid in proc.sids - sids:
                self.by_sid.pop(sid, None)
            proc.sids = set(sids)
            for sid in sids:
                self.by_sid[sid] = proc
            proc.output.capture = None
            proc.output.keep_in(self.config.folder / f"{record.id}.log")
            self.track(proc, record, proc.output.ring.end)  # its result showed the rest

    def track(self, proc: Proc, record: ProcessRecord, unread: int = 0) -> None:
        """Keep `proc` as the background process `record` (holding the lock), its output
        from offset `unread` on not read yet. A relay of the pool's, if any, holds its output
        back until sent (from offset 0); without one it is read at BACKGROUND_RATE."""
        proc.record = record
        if self.config.relayed:
            proc.output.relayed = 0
        else:
            proc.rate = BACKGROUND_RATE
        proc.read_offset = unread
        self.background[record.id] = proc
        self.index.put(record)
        self._tell(proc, "started")
        if proc.ended:  # it ended before it was known as a background process
            self._end(proc, None)

    def forget(self, proc: Proc) -> None:
        """A foreground command is over: stop pumping its output and drop it (unless what it
        left running was adopted)."""
        with self.changed:
            self.by_pid.pop(proc.pid, None)
            if proc.record is not None:
                return
            for sid in proc.sids:
                if self.by_sid.get(sid) is proc:
                    del self.by_sid[sid]
            proc.sids.clear()
        PUMP.remove(proc.sink)
        _close(proc.stdin)

    def forget_sids_not_in(self, live: set[int]) -> None:
        """Process sessions not in `live` have emptied: end the processes that had only
        those."""
        with self.changed:
            for proc in self.running():
                gone = proc.sids - live
                for sid in gone:
                    proc.sids.discard(sid)
                    self.by_sid.pop(sid, None)
                if gone and proc.ended:
                    self._end(proc, None)

    def running(self) -> list[Proc]:
        """The background processes still running."""
        with self.changed:
            return [p for p in self.background.values() if p.record and p.record.running]

    def info(self, proc: Proc, ports: tuple[int, ...] = ()) -> ProcessInfo:
        assert proc.record is not None
        return ProcessInfo(proc.record, ports, proc.output.ring.end, proc.read_offset)

    # --- what the threads tell ------------------------------------------------------------

    def output_taken(self, proc: Proc, data: bytes) -> bool:
        with self.changed:
            keep_reading = proc.output.take(data)
            self.last_activity = time.monotonic()
            self.changed.notify_all()
            end = proc.output.ring.end
        if proc.record is not None:
            self._emit(ProcessEvent(self.conversation_id, proc.record.id, "output", offset=end))
        return keep_reading

    def flush_logs(self) -> None:
        """Write what the background processes' logs hold back."""
        with self.changed:
            for proc in self.background.values():
                proc.output.flush_log()

    def output_ended(self, proc: Proc) -> None:
        with self.changed:
            proc.output.end()
            self.changed.notify_all()

    def _on_event(self, event: dict[str, Any]) -> None:
        if event.get("event") != "exit":
            return
        pid, sid = event.get("pid"), event.get("sid")
        code, sig = event.get("code"), event.get("signal")
        ended = (code if isinstance(code, int) else None, sig if isinstance(sig, int) else None)
        with self.changed:
            proc = self.by_pid.get(pid) if isinstance(pid, int) else None
            if proc is not None and proc.main_exit is None:
                proc.main_exit = ended
            owner = self.by_sid.get(sid) if isinstance(sid, int) else None
            if owner is not None and isinstance(sid, int):
                owner.last_exit = ended
                if event.get("sid_empty") is True:
                    owner.sids.discard(sid)
                    del self.by_sid[sid]
                    if owner.ended and owner.record is not None:
                        self._end(owner, None)
            self.changed.notify_all()

    def _end(self, proc: Proc, reason: EndReason | None) -> None:
        """Record the end of background process `proc` (holding the lock)."""
        assert proc.record is not None
        code, sig = proc.last_exit or (None, None)
        if reason is None:
            limit: EndReason = "killed_limit" if self._oom_killed(sig) else "exited"
            reason = proc.stop_reason or self.end_reason or limit
        proc.record = proc.record.ended(reason, code, sig)
        self.index.put(proc.record)
        _close(proc.stdin)
        proc.stdin = None
        self._tell(proc, "exited")
        ended = [i for i, p in self.background.items() if p.record and not p.record.running]
        for old in ended[:-KEPT_ENDED]:  # their output stays in their log files
            del self.background[old]

    def _oom_killed(self, sig: int | None) -> bool:
        if sig != signal.SIGKILL:
            return False
        kills = self.oom_kills()
        seen, self._oom_seen = self._oom_seen, kills
        return kills > seen

    def oom_kills(self) -> int:
        cgroup = self.launched.cgroup
        return 0 if cgroup is None else cgroup.out_of_memory()[0]

    def _on_closed(self) -> None:
        """The supervisor is gone: everything of the session ended with it."""
        with self.changed:
            self.closed = True
            reason = self.end_reason or "session_ended"
            self.end_reason = reason
            for proc in list(self.background.values()):
                if proc.record is not None and proc.record.running:
                    proc.sids.clear()
                    proc.last_exit = None  # killed with the sandbox, unreported
                    self._end(proc, reason)
            self.by_sid.clear()
            self.changed.notify_all()
        if reason == "session_ended":
            log.warning("a sandbox session ended unexpectedly", extra={"fields": {
                "conversation_id": self.conversation_id}})  # fmt: skip
        self._release()

    def _tell(self, proc: Proc, phase: Phase) -> None:
        assert proc.record is not None
        self._emit(ProcessEvent(self.conversation_id, proc.record.id, phase, self.info(proc)))

    def _emit(self, event: ProcessEvent) -> None:
        try:
            self.listener(event)
        except Exception:
            log.exception("a process listener failed")

    # --- activity and the end -------------------------------------------------------------

    def touch(self) -> None:
        self.last_activity = time.monotonic()

    @contextlib.contextmanager
    def in_use(self) -> Iterator[None]:
        """Keep the session from ending idle while the block runs (a command, a terminal)."""
        with self.changed:
            self.busy += 1
        try:
            yield
        finally:
            with self.changed:
                self.busy -= 1
                self.last_activity = time.monotonic()

    def idle_seconds(self) -> float:
        """How long nothing happened in it (0 while it is in use)."""
        with self.changed:
            return 0.0 if self.busy else time.monotonic() - self.last_activity

    def wait(self, predicate: Callable[[], bool], timeout: float | None) -> bool:
        """Wait until `predicate()` (checked holding the lock) or the session ends."""
        return wait_for(self.changed, lambda: predicate() or self.closed, timeout)

    def begin_close(self, reason: EndReason) -> None:
        """SIGTERM every process of the session; `finish_close` ends what remains."""
        with self.changed:
            if self.closed or self.end_reason is not None:
                return
            self.end_reason = reason
            sids = set(self.by_sid)
        if sids:
            self.kill_sids(sids, "TERM")

    def finish_close(self, deadline: float) -> None:
        """Wait for the processes until `deadline`, then end the sandbox (all that is left
        dies with its supervisor) and release what the session holds."""
        self.wait(lambda: not self.by_sid, max(0.0, deadline - time.monotonic()))
        self.channel.close()
        wait_for(self.changed, lambda: self.released, START_SECONDS)

    def close(self, reason: EndReason, grace: float = END_GRACE_SECONDS) -> None:
        """End the session: SIGTERM, `grace`, then the sandbox ends with everything in it."""
        self.begin_close(reason)
        self.finish_close(time.monotonic() + grace)

    def _stop_all(self, reason: EndReason) -> None:
        """The disk floor: every process is killed and the session ends (watcher thread)."""
        self.shortage = self._watch.shortage
        with self.changed:
            if self.end_reason is None:
                self.end_reason = reason
        self.channel.close()

    def _release(self) -> None:
        """Stop watching the disk, wait for the sandbox's process, remove its cgroup. The
        output pipes end by themselves: their writers died with the sandbox."""
        self._watch.close()
        try:
            self.launched.stop()
        finally:
            with self.changed:
                self.released = True
                self.changed.notify_all()

    def _ask(self, op: str, then: Callable[[Answer], Any] | None = None, **fields: Any) -> Answer:
        if self.closed:
            raise SessionEnded(self.ended_text())
        try:
            return self.channel.request(op, then=then, **fields)
        except ChannelClosed:
            if self.closed or self.channel.closed:
                raise SessionEnded(self.ended_text()) from None
            raise

    def ended_text(self) -> str:
        return f"this conversation's sandbox session has ended ({self.end_reason or 'closed'})"


def _close(fd: int | None) -> None:
    if fd is not None:
        with contextlib.suppress(OSError):
            os.close(fd)
