"""What server processes sharing a data folder tell each other (docs/protocol.md §13).

A process asks the one running a conversation's task (for a process op: the one holding its
sandbox session) to act on it: a command goes out as `{"op", "conversation_id", ...}` and
comes back as an answer, both JSON objects; `running`
entries say which process runs which task. Processes of two versions may share a Redis during
a rolling restart, so the JSON keys stay as they are: a field is added, never renamed, and an
op a process does not know is answered as not handled (the asker then acts as if no process
ran the task), never with an exception.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any, ClassVar, Self

from protocol.errors import ErrorCode, failure

# --- commands -------------------------------------------------------------------------------


@dataclass(frozen=True)
class _ConversationCommand:
    """A command about a conversation that says nothing more (its subclasses may)."""

    op: ClassVar[str]
    conversation_id: str

    @classmethod
    def _from(cls, data: dict[str, Any], cid: str) -> Self:
        return cls(cid)


@dataclass(frozen=True)
class CancelCommand(_ConversationCommand):
    """Stop the conversation's task or condensation."""

    op: ClassVar[str] = "cancel"


@dataclass(frozen=True)
class ApproveCommand(_ConversationCommand):
    """Answer the call `call_id` that waits for approval."""

    op: ClassVar[str] = "approve"
    call_id: str
    approved: bool
    always: bool = False

    @classmethod
    def _from(cls, data: dict[str, Any], cid: str) -> ApproveCommand:
        return cls(
            cid, str(data.get("call_id")), bool(data.get("approved")), bool(data.get("always"))
        )


@dataclass(frozen=True)
class JoinCommand(_ConversationCommand):
    """Put client `sid` (of any process) in `room` and replay it what came after `after_seq`."""

    op: ClassVar[str] = "join"
    after_seq: int
    sid: str
    room: str

    @classmethod
    def _from(cls, data: dict[str, Any], cid: str) -> JoinCommand:
        after_seq = int(data.get("after_seq") or 0)
        return cls(cid, after_seq, str(data.get("sid")), str(data.get("room") or cid))


@dataclass(frozen=True)
class StatusCommand(_ConversationCommand):
    """Say where the running task is (its latest `status`)."""

    op: ClassVar[str] = "status"


@dataclass(frozen=True)
class ReapCommand(_ConversationCommand):
    """End as interrupted the task a dead process left running (sent by a process to itself,
    once it holds that task's lease)."""

    op: ClassVar[str] = "reap"


@dataclass(frozen=True)
class ProcessCommand(_ConversationCommand):
    """Apply an op on the session (§4.1: the process ops, list_processes, process_output,
    stop_process, restart_process, and the terminal ops, terminal_*, list_terminals) where the
    conversation's sandbox session lives; `request` is the op's payload as the client sent
    it, validated again there; `sid` the client that sent it (a terminal's output goes to it)."""

    op: ClassVar[str] = "process"
    name: str
    request: dict[str, Any]
    sid: str = ""

    @classmethod
    def _from(cls, data: dict[str, Any], cid: str) -> ProcessCommand:
        request = data.get("request")
        request = request if isinstance(request, dict) else {}
        return cls(cid, str(data.get("name")), request, str(data.get("sid") or ""))


Command = (
    CancelCommand | ApproveCommand | JoinCommand | StatusCommand | ReapCommand | ProcessCommand
)
_COMMANDS: dict[str, type[Command]] = {
    cls.op: cls
    for cls in (
        CancelCommand,
        ApproveCommand,
        JoinCommand,
        StatusCommand,
        ReapCommand,
        ProcessCommand,
    )
}


class UnknownCommand(ValueError):
    """A command this version does not know, or no command at all."""


def command_to_wire(command: Command) -> dict[str, Any]:
    """`{"op", "conversation_id", ...}`, the command as it goes to another process."""
    return {"op": command.op, **dataclasses.asdict(command)}


def command_from_wire(data: Any) -> Command:
    """The command a process sent; raises UnknownCommand for an op this version lacks."""
    if not isinstance(data, dict):
        raise UnknownCommand(f"a command is a JSON object, not {type(data).__name__}")
    op = data.get("op")
    cls = _COMMANDS.get(op) if isinstance(op, str) else None
    if cls is None:
        raise UnknownCommand(f"no command {op!r} here; known: {', '.join(_COMMANDS)}")
    return cls._from(data, str(data.get("conversation_id") or ""))


# --- answers --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Cancelled:
    cancelled: bool  # False: the task had ended

    def to_wire(self) -> dict[str, Any]:
        return {"ok": True, "cancelled": self.cancelled}


@dataclass(frozen=True)
class Approved:
    always_allowed: list[str] | None  # the tools now always allowed; None: no such call waits

    def to_wire(self) -> dict[str, Any]:
        return {"ok": True, "always_allowed": self.always_allowed}


@dataclass(frozen=True)
class Joined:
    """The `join` ack's figures (§4.1), as the process running the task gives them."""

    running: bool
    last_seq: int
    replays_after: int

    def to_wire(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class TaskStatus:
    status: dict[str, Any] | None  # a `status` event's content (§4.2)

    def to_wire(self) -> dict[str, Any]:
        return {"ok": True, "status": self.status}


@dataclass(frozen=True)
class Applied:
    """A command applied that answers nothing more (`reap`)."""

    def to_wire(self) -> dict[str, Any]:
        return {"ok": True}


@dataclass(frozen=True)
class ProcessAnswer:
    """A process op's ack (§4.1), as the process holding the sandbox session gave it."""

    ack: dict[str, Any]

    def to_wire(self) -> dict[str, Any]:
        return {"ok": True, "ack": self.ack}


@dataclass(frozen=True)
class NotHere:
    """The task does not run in the answering process (it ended meanwhile): the asker acts
    on its own."""

    def to_wire(self) -> dict[str, Any]:
        return {"ok": False}


@dataclass(frozen=True)
class Failed:
    """The command failed in the answering process, or it does not know it."""

    code: ErrorCode
    message: str

    def to_wire(self) -> dict[str, Any]:
        return failure(self.code, self.message)


Answer = Cancelled | Approved | Joined | TaskStatus | Applied | ProcessAnswer | NotHere | Failed


def answer_from_wire(command: Command, data: Any) -> Answer:
    """What the owner answered `command`; NotHere for anything but that command's answer (an
    older process answers an op it does not know so)."""
    wire: dict[str, Any] = data if isinstance(data, dict) else {}
    if isinstance(command, JoinCommand):
        if "last_seq" not in wire:
            return NotHere()
        replays_after = int(wire.get("replays_after") or 0)
        return Joined(bool(wire.get("running")), int(wire["last_seq"]), replays_after)
    if wire.get("ok") is not True:
        return NotHere()
    if isinstance(command, CancelCommand):
        return Cancelled(bool(wire.get("cancelled")))
    if isinstance(command, ApproveCommand):
        allowed = wire.get("always_allowed")
        return Approved([str(tool) for tool in allowed] if isinstance(allowed, list) else None)
    if isinstance(command, StatusCommand):
        status = wire.get("status")
        return TaskStatus(status if isinstance(status, dict) else None)
    if isinstance(command, ProcessCommand):
        ack = wire.get("ack")
        return ProcessAnswer(ack) if isinstance(ack, dict) else NotHere()
    return Applied()


# --- what runs where ------------------------------------------------------------------------


@dataclass(frozen=True)
class RunningTask:
    """A `running` entry: the process running a conversation's task, and the task's user
    message. Its text is compared as written (a task taken over is the entry as read)."""

    owner: str
    message_id: str

    def to_wire(self) -> str:
        return json.dumps({"owner": self.owner, "message_id": self.message_id})

    @classmethod
    def from_wire(cls, text: Any) -> RunningTask | None:
        """The entry of `text`; None for what is none (gone, or not JSON)."""
        try:
            data = json.loads(text) if isinstance(text, str) else None
        except ValueError:
            return None
        if not isinstance(data, dict) or not isinstance(data.get("owner"), str):
            return None
        return cls(data["owner"], str(data.get("message_id") or ""))
