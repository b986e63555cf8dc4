"""A session's processes as the server keeps them (Proc: a spawned process and what stays
of it) and as it shows them (ProcessInfo, ProcessEvent, Port), and what a session runs with
(SessionConfig)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from modules.sandbox.disk_floor import DiskFloor
from modules.sandbox.session.output_store import ProcessOutput
from modules.sandbox.session.records import EndReason, ProcessRecord

Phase = Literal["started", "output", "ports", "exited"]


@dataclass(frozen=True)
class SessionConfig:
    """What one session runs with, worked out by the pool from the settings."""

    conversation_id: str
    folder: Path  # DATA_DIR/processes/CID
    environment: dict[str, str]
    rlimits: dict[str, list[int]]
    output_limit: int  # characters a foreground command's result keeps
    max_processes: int  # background processes running at once
    settle_seconds: float
    disk_floor: DiskFloor
    memory_mb: int
    relayed: bool = False  # a relay sends its processes' output: hold it until sent


@dataclass(frozen=True)
class ProcessInfo:
    """A process of the session as its users see it."""

    record: ProcessRecord
    ports: tuple[int, ...] = ()
    output_end: int = 0  # the offset after everything it wrote
    read_offset: int = 0  # how far the model has read
    foreground: str | None = None  # a terminal's: what runs in it now (None: its prompt)


@dataclass(frozen=True)
class ProcessEvent:
    """A change for the conversation's timeline; listeners are called on the session's own
    threads and must only note it and return."""

    conversation_id: str
    process_id: str
    phase: Phase
    info: ProcessInfo | None = None
    offset: int | None = None  # phase output: where its output now ends


@dataclass(frozen=True)
class Port:
    port: int
    host: str
    pid: int
    sid: int


@dataclass
class Proc:
    """One spawned process and whatever stays in the process sessions it owns (its own sid,
    and those of what it left behind once adopted); a foreground command until it ends."""

    pid: int
    output: ProcessOutput
    stdin: int | None
    out_fd: int  # the pump's: only looked at (FIONREAD), never read or closed here
    sids: set[int] = field(default_factory=set)
    main_exit: tuple[int | None, int | None] | None = None  # (code, signal) of `pid`
    last_exit: tuple[int | None, int | None] | None = None  # of the last member reaped
    record: ProcessRecord | None = None  # set when it is (or becomes) a background process
    read_offset: int = 0
    stop_reason: EndReason | None = None
    rate: int | None = None
    sink: Any = None
    started: float = field(default_factory=time.monotonic)

    @property
    def ended(self) -> bool:
        return not self.sids
