"""The processes of a conversation's session as they are kept: DATA_DIR/processes/CID/index.json
(written atomically at each start and end), so that after the server stopped, whoever asks
learns which processes ended with it."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
from dataclasses import asdict, dataclass, field, fields, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

log = logging.getLogger(__name__)

Origin = Literal["agent", "user"]
# Why a process ended: it exited by itself; stop was asked; a limit (memory, processes) killed
# it; its session ended for being idle, its conversation being deleted, the server stopping,
# the disk floor, or its sandbox ending unexpectedly (the supervisor killed).
EndReason = Literal[
    "exited",
    "stopped",
    "killed_limit",
    "session_idle",
    "conversation_deleted",
    "server_stopped",
    "disk_floor",
    "session_ended",
]
Audience = Literal["page", "model"]  # who is told of a process that ended with the server
INDEX_NAME = "index.json"
PROCESSES_DIR = "processes"  # DATA_DIR/processes/CID: a conversation's records and logs


def processes_folder(data_dir: Path, conversation_id: str) -> Path:
    """Where a conversation's process records and logs are kept."""
    return data_dir / PROCESSES_DIR / conversation_id


def has_processes(data_dir: Path, conversation_id: str) -> bool:
    """Whether the conversation ever had a process in a session (its index exists): what a
    front can ask without starting a sandbox."""
    return (processes_folder(data_dir, conversation_id) / INDEX_NAME).exists()


def now_iso() -> str:
    """The time now, ISO-8601 UTC with a Z (as every time on disk)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def this_server() -> str:
    """Who owns a running process: this host, this process and its start time (so a pid
    reused after a restart is not taken for the same server)."""
    return f"{socket.gethostname()}:{os.getpid()}:{_start_time(os.getpid())}"


def _start_time(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return "?"


def owner_gone(owner: str) -> bool:
    """Whether the server that owned a process is known to have stopped: it ran on this host
    and its process is gone (another host's cannot be told from here)."""
    host, _, rest = owner.partition(":")
    pid, _, started = rest.partition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    return _start_time(int(pid)) != started


@dataclass
class ProcessRecord:
    """One process of a conversation's session, as index.json keeps it."""

    id: str  # p1, p2, ... unique in the conversation
    pid: int  # inside the session's PID namespace
    command: str
    origin: Origin = "agent"
    terminal: bool = False  # a person's terminal (origin user): not the model's to use
    started_at: str = field(default_factory=now_iso)
    owner: str = field(default_factory=this_server)
    ended_at: str | None = None
    exit_code: int | None = None
    signal: int | None = None
    end_reason: EndReason | None = None
    # It ended with the server: the page (an `exited` event, once a server runs) and the model
    # (a line with the next user message) are yet to be told.
    told_page: bool = True
    told_model: bool = True

    @property
    def running(self) -> bool:
        return self.ended_at is None

    def ended(
        self, reason: EndReason, code: int | None = None, signal: int | None = None
    ) -> ProcessRecord:
        """This record, ended now for `reason` (to be told when the server stopped)."""
        told = reason != "server_stopped"
        return replace(self, ended_at=now_iso(), end_reason=reason, exit_code=code, signal=signal,
                       told_page=told, told_model=told)  # fmt: skip

    @classmethod
    def from_json(cls, value: object) -> ProcessRecord | None:
        """A record read back, or None when it does not have the shape of one."""
        if not isinstance(value, dict):
            return None
        known = {f.name for f in fields(cls)}
        try:
            record = cls(**{k: v for k, v in value.items() if k in known})
        except TypeError:
            return None
        ok = isinstance(record.id, str) and isinstance(record.pid, int)
        return record if ok and isinstance(record.command, str) else None


class ProcessIndex:
    """One conversation's index.json. Its session's lock guards it."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.path = folder / INDEX_NAME
        self.records: dict[str, ProcessRecord] = {}
        self._load()

    def _load(self) -> None:
        try:
            raw = json.loads(self.path.read_text())
        except FileNotFoundError:
            return
        except (OSError, ValueError) as exc:
            log.warning("a process index could not be read", extra={"fields": {
                "path": str(self.path), "error": str(exc)}})  # fmt: skip
            return
        for value in raw.get("processes", []) if isinstance(raw, dict) else []:
            record = ProcessRecord.from_json(value)
            if record is not None:
                self.records[record.id] = record

    def next_id(self) -> str:
        """The next free id: p1, p2, ..."""
        numbers = [int(i[1:]) for i in self.records if i[1:].isdigit()]
        return f"p{max(numbers, default=0) + 1}"

    def put(self, record: ProcessRecord) -> None:
        """Keep `record` (new, or a new state of one) and write the index."""
        self.records[record.id] = record
        self._write()

    def end_stale(self) -> list[ProcessRecord]:
        """End as `server_stopped` the records still marked running whose server stopped;
        those it ended."""
        stale = [r for r in self.records.values() if r.running and owner_gone(r.owner)]
        for record in stale:
            self.records[record.id] = record.ended("server_stopped")
        if stale:
            self._write()
        return [self.records[r.id] for r in stale]

    def take_untold(self, audience: Audience) -> list[ProcessRecord]:
        """The records whose end `audience` is yet to be told of, marked told from now on."""
        page = audience == "page"
        untold = [r for r in self.records.values() if not (r.told_page if page else r.told_model)]
        for record in untold:
            told = replace(record, told_page=True) if page else replace(record, told_model=True)
            self.records[record.id] = told
        if untold:
            self._write()
        return untold

    def _write(self) -> None:
        data = {"processes": [asdict(r) for r in self.records.values()]}
        temporary = self.path.with_name(f".{INDEX_NAME}.{os.getpid()}.tmp")
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            temporary.write_text(json.dumps(data, indent=1))
            os.replace(temporary, self.path)
        except OSError as exc:  # a full disk: the processes run on, unrecorded
            with contextlib.suppress(OSError):
                temporary.unlink()
            log.warning("a process index could not be written", extra={"fields": {
                "path": str(self.path), "error": str(exc)}})  # fmt: skip
