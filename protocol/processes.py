"""The typed answers of the process ops (docs/protocol.md §4.1): a conversation's background
processes and a piece of one's output, as workspace_client gives them and the terminal shows
them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class BackgroundProcess:
    """A background process of a conversation, as `list_processes` gives it. `output_end`
    (bytes written so far) is None when the process is known only from its record."""

    id: str
    pid: int | None
    command: str
    origin: str
    started_at: str | None
    running: bool
    ended_at: str | None
    exit_code: int | None
    signal: int | None
    end_reason: str | None
    ports: list[int]
    output_end: int | None

    @classmethod
    def from_wire(cls, wire: dict[str, Any]) -> BackgroundProcess:
        """One entry of `processes` (or an op's `process`)."""
        return cls(
            id=str(wire["id"]),
            pid=wire.get("pid"),
            command=str(wire.get("command") or ""),
            origin=str(wire.get("origin") or ""),
            started_at=wire.get("started_at"),
            running=bool(wire.get("running")),
            ended_at=wire.get("ended_at"),
            exit_code=wire.get("exit_code"),
            signal=wire.get("signal"),
            end_reason=wire.get("end_reason"),
            ports=[int(p) for p in wire.get("ports") or []],
            output_end=wire.get("output_end"),
        )


@dataclass(frozen=True)
class ProcessOutput:
    """`process_output`: `text` from byte `offset` (`skipped` bytes before it were no longer
    kept); read on from `next_offset`; `output_end` is all the process has written so far."""

    text: str
    offset: int
    skipped: int
    next_offset: int
    output_end: int
    running: bool
    exit_code: int | None

    @classmethod
    def from_wire(cls, ack: dict[str, Any]) -> ProcessOutput:
        """The op's answer."""
        return cls(
            text=str(ack.get("text") or ""),
            offset=int(ack.get("offset") or 0),
            skipped=int(ack.get("skipped") or 0),
            next_offset=int(ack.get("next_offset") or 0),
            output_end=int(ack.get("output_end") or 0),
            running=bool(ack.get("running")),
            exit_code=ack.get("exit_code"),
        )
