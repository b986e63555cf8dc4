"""Background processes of a conversation's session: started to run on (a dev server, a
watcher), their output read from an offset with a wait, their stdin written, stopped, listed.
At most `max_processes` run at once in a conversation."""

from __future__ import annotations

import codecs
import contextlib
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from modules.sandbox.runner import SandboxUnavailable
from modules.sandbox.session.process import Proc, ProcessInfo
from modules.sandbox.session.pump import PUMP
from modules.sandbox.session.records import Origin, ProcessRecord
from modules.sandbox.session.supervised import SupervisedSandbox
from modules.sandbox.session.terminal import foreground

READ_BYTES = 64 * 1024  # at most this much output in one read
PORT_POLL_SECONDS = 0.25
WRITE_SECONDS = 5.0  # for a process to take what is written to its stdin
STOP_SECONDS = 2.0  # after SIGTERM or SIGINT, before SIGKILL
STOP_SIGNALS = ("TERM", "INT", "KILL")
EXIT_DRAIN_SECONDS = 0.5  # after it ended, for the rest of its output


class ProcessLimitReached(SandboxUnavailable):
    """As many background processes as allowed run already."""


class UnknownProcess(LookupError):
    """No process of the conversation has this id (or its output is no longer kept)."""


@dataclass(frozen=True)
class Output:
    """Output read from a background process: the text from `offset` to `next_offset`, with
    `skipped` bytes before it no longer kept in memory (they are in its log file)."""

    text: str
    offset: int
    next_offset: int
    skipped: int
    info: ProcessInfo


def start(
    sandbox: SupervisedSandbox, command: str, cwd: Path, settle: float, origin: Origin = "agent"
) -> Output:
    """Start `bash -c command` in the background for `origin` (who asked); return after
    `settle` seconds at most, or as soon as it ends or listens on a port, with what it wrote
    so far."""
    running = sandbox.running()
    limit = sandbox.config.max_processes
    if len(running) >= limit:
        ids = ", ".join(p.record.id for p in running if p.record)
        raise ProcessLimitReached(
            f"at most {limit} background processes run at once in a conversation ({ids} "
            "run now): stop one first (AGENT_MAX_PROCESSES)"
        )
    sandbox.config.disk_floor.refuse_if_short()
    proc = sandbox.spawn(["bash", "-c", command], cwd, stdin=True)
    with sandbox.changed:
        record = ProcessRecord(sandbox.index.next_id(), proc.pid, command, origin)
        proc.output.keep_in(sandbox.config.folder / f"{record.id}.log")
        sandbox.track(proc, record)
    deadline = time.monotonic() + settle
    ports: tuple[int, ...] = ()
    while not sandbox.wait(lambda: proc.ended, min(PORT_POLL_SECONDS, _left(deadline))):
        ports = _ports(sandbox, proc)
        if ports or time.monotonic() >= deadline:
            break
    if proc.ended:  # what it wrote last may still be in the pipe
        sandbox.wait(lambda: proc.output.eof, EXIT_DRAIN_SECONDS)
    first = read(sandbox, record.id)
    return replace(first, info=replace(first.info, ports=ports))


def read(
    sandbox: SupervisedSandbox,
    process_id: str,
    offset: int | None = None,
    wait: float = 0.0,
    until: Callable[[str], bool] | None = None,
) -> Output:
    """Its output from `offset` (default: what has not been read yet), waiting up to `wait`
    seconds for some (or, with `until`, for text that satisfies it) unless it ended."""
    proc = find(sandbox, process_id)
    with sandbox.changed:
        begin = proc.read_offset if offset is None else max(0, offset)

    def ready() -> bool:
        ring = proc.output.ring
        if proc.ended and (proc.output.eof or ring.end > begin):
            return True
        if until is None:
            return ring.end > begin
        return until(_decode(ring.read(begin, ring.capacity).data))

    if wait > 0:
        sandbox.wait(ready, wait)
    sandbox.touch()
    with sandbox.changed:
        chunk = proc.output.read_text(begin, READ_BYTES)
        proc.read_offset = max(proc.read_offset, chunk.next_offset)
    return Output(chunk.text, begin, chunk.next_offset, chunk.skipped, info(sandbox, proc))


def peek(sandbox: SupervisedSandbox, process_id: str, offset: int, limit: int) -> Output:
    """Its output from `offset`, at most `limit` bytes; nothing else changes."""
    proc = find(sandbox, process_id)
    with sandbox.changed:
        chunk = proc.output.read_text(offset, limit)
    return Output(chunk.text, offset, chunk.next_offset, chunk.skipped, info(sandbox, proc))


def relay_sent(sandbox: SupervisedSandbox, process_id: str, offset: int) -> None:
    """The conversation's relay sent its output up to `offset`: read more if it was held."""
    proc = find(sandbox, process_id)
    with sandbox.changed:
        resume = proc.output.relay_sent(offset)
    if resume:
        PUMP.resume(proc.sink)


def write(sandbox: SupervisedSandbox, process_id: str, text: str, eof: bool = False) -> int:
    """Write `text` to its stdin (and close it with `eof`); the bytes written, which may be
    fewer when it does not read them within WRITE_SECONDS."""
    proc = find(sandbox, process_id)
    data = text.encode("utf-8")
    written = 0
    with sandbox.changed:
        fd = proc.stdin
        if fd is None:
            raise UnknownProcess(f"{process_id} has ended or its input was closed")
        os.set_blocking(fd, False)
    deadline = time.monotonic() + WRITE_SECONDS
    while written < len(data) and time.monotonic() < deadline:
        try:
            written += os.write(fd, data[written:])
        except BlockingIOError:
            sandbox.wait(lambda: proc.ended, 0.02)
        except OSError:  # it closed its input, or ended
            break
    if eof:
        with sandbox.changed:
            if proc.stdin is not None:
                with contextlib.suppress(OSError):
                    os.close(proc.stdin)
                proc.stdin = None
    sandbox.touch()
    return written


def stop(sandbox: SupervisedSandbox, process_id: str, sig: str = "TERM") -> ProcessInfo:
    """Stop it with `sig` (TERM, INT or KILL); SIGKILL after STOP_SECONDS if it is still there."""
    if sig not in STOP_SIGNALS:
        raise ValueError(f"signal: one of {', '.join(STOP_SIGNALS)}")
    proc = find(sandbox, process_id)
    with sandbox.changed:
        if proc.ended:
            return info(sandbox, proc)
        proc.stop_reason = "stopped"
    sandbox.signal(proc, sig)
    if not sandbox.wait(lambda: proc.ended, STOP_SECONDS) and sig != "KILL":
        sandbox.signal(proc, "KILL")
        sandbox.wait(lambda: proc.ended, STOP_SECONDS)
    sandbox.touch()
    return info(sandbox, proc)


def listing(sandbox: SupervisedSandbox) -> list[ProcessInfo]:
    """Every process of the conversation: those of this session (with their ports) and
    those that ended before it."""
    ports: dict[int, set[int]] = {}
    with contextlib.suppress(OSError):
        for port in sandbox.ports():
            ports.setdefault(port.sid, set()).add(port.port)
    with sandbox.changed:
        records = list(sandbox.index.records.values())
        live = dict(sandbox.background)
    listed = []
    for record in records:
        proc = live.get(record.id)
        if proc is None:
            listed.append(ProcessInfo(record, foreground=_doing(sandbox, record)))
            continue
        found = sorted({p for sid in proc.sids for p in ports.get(sid, ())})
        listed.append(info(sandbox, proc, tuple(found)))
    return listed


def find(sandbox: SupervisedSandbox, process_id: str) -> Proc:
    with sandbox.changed:
        proc = sandbox.background.get(process_id)
        record = sandbox.index.records.get(process_id)
    if proc is not None:
        return proc
    if record is not None and record.terminal:
        raise UnknownProcess(
            f"{process_id} is a person's terminal, not a background process: only they type "
            "into it, read it and close it"
        )
    if record is not None:
        raise UnknownProcess(
            f"{process_id} ended before this session began (or long ago): its output is in "
            "its log file only"
        )
    raise UnknownProcess(f"no process {process_id} in this conversation")


def _doing(sandbox: SupervisedSandbox, record: ProcessRecord) -> str | None:
    return foreground(sandbox, record) if record.terminal else None


def info(sandbox: SupervisedSandbox, proc: Proc, ports: tuple[int, ...] = ()) -> ProcessInfo:
    with sandbox.changed:
        return sandbox.info(proc, ports)


def _ports(sandbox: SupervisedSandbox, proc: Proc) -> tuple[int, ...]:
    try:
        return tuple(sorted({p.port for p in sandbox.ports() if p.sid in proc.sids}))
    except OSError:
        return ()


def _decode(data: bytes) -> str:
    return codecs.decode(data, "utf-8", errors="replace")


def _left(deadline: float) -> float:
    return max(0.0, deadline - time.monotonic())
