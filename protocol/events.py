"""The server's events (docs/protocol.md §4.2 the events of a task, §4.3 outside tasks) and
their one decoder; the values they carry are protocol/event_values.py's.

The core stamps each event with its conversation and `seq` and hands it to the sink it was
given; it becomes a dict only at a transport (`to_wire`: Socket.IO, the CLI's `--json`, the
replay log). `parse_event(name, payload)` turns a wire event back into its class, and never
raises on what a newer server may send: a field this version does not know is left out, an
event it does not know (or one whose payload does not fit) comes as `Unknown(name, payload)`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, is_dataclass
from typing import Any, ClassVar, Literal

from protocol.event_values import ContextUsage, FileChange, FolderRefresh, Money, Usage
from protocol.options import Mode
from protocol.records import AttachmentMeta, PlanMeta, StepStatus, TokenUsage

# --- the events -----------------------------------------------------------------------------


@dataclass(kw_only=True)
class Event:
    """Base of every event; `name` is the Socket.IO event name.

    `conversation_id` and `seq` are stamped by the core when it reports the event; a
    `file_tree` event from the watcher, outside any task, has neither.
    """

    name: ClassVar[str] = ""
    conversation_id: str | None = None
    seq: int | None = None
    agent: str | None = None  # the agent whose task reported it
    parent_call_id: str | None = None  # a sub-agent's: the delegating call it runs under
    depth: int | None = None  # a sub-agent's: 1 under the top agent, 2 under a sub-agent

    def to_wire(self) -> dict[str, Any]:
        """The JSON-ready fields without the None ones; shallow, as a deep copy per token costs."""
        data: dict[str, Any] = {}
        for key, value in vars(self).items():
            if value is None:
                continue
            if is_dataclass(value):
                value = asdict(value)  # type: ignore[arg-type]
            elif isinstance(value, list):
                value = [asdict(v) if is_dataclass(v) else v for v in value]  # type: ignore[arg-type]
            data[key] = value
        return data


@dataclass
class UserMessage(Event):
    """The user's message a task starts with, as its record keeps it: the task's first event,
    so that every view of the conversation shows it above the answer. `parent_id` is the
    message it follows (None: it starts the conversation, or a new first branch)."""

    name: ClassVar[str] = "user_message"
    message_id: str
    text: str
    parent_id: str | None
    mode: Mode | None = None
    skill: str | None = None
    attachments: list[AttachmentMeta] | None = None

    def to_wire(self) -> dict[str, Any]:
        data = super().to_wire()
        data["parent_id"] = self.parent_id  # null says "a root", not "unknown"
        return data


def _delta_wire(delta: Token | Thinking) -> dict[str, Any]:
    """Event.to_wire of a delta without its per-field loop: one goes out per model delta."""
    data: dict[str, Any] = {}
    if delta.conversation_id is not None:
        data["conversation_id"] = delta.conversation_id
    if delta.seq is not None:
        data["seq"] = delta.seq
    if delta.agent is not None:
        data["agent"] = delta.agent
    if delta.parent_call_id is not None:
        data["parent_call_id"] = delta.parent_call_id
    if delta.depth is not None:
        data["depth"] = delta.depth
    data["message_id"] = delta.message_id
    data["text"] = delta.text
    return data


@dataclass
class Token(Event):
    name: ClassVar[str] = "token"
    message_id: str
    text: str

    to_wire = _delta_wire


@dataclass
class Thinking(Event):
    name: ClassVar[str] = "thinking"
    message_id: str
    text: str

    to_wire = _delta_wire


ToolPhase = Literal["start", "args", "end", "approval", "output", "result"]


@dataclass
class ToolEvent(Event):
    name: ClassVar[str] = "tool"
    call_id: str
    tool: str
    phase: ToolPhase
    delta: str | None = None
    arguments: Any = None
    preview: str | None = None
    warnings: list[str] | None = None  # with `approval`: what a reader could miss in the preview
    ok: bool | None = None
    output: str | None = None
    duration_ms: int | None = None
    details: dict[str, Any] | None = None
    declined: bool | None = None  # with `result`: true when the user declined the call

    def to_wire(self) -> dict[str, Any]:
        data = super().to_wire()
        data["name"] = data.pop("tool")
        return data


TaskState = Literal["idle", "thinking", "streaming", "tool"]


@dataclass
class Status(Event):
    name: ClassVar[str] = "status"
    state: TaskState
    iteration: int
    context: ContextUsage
    usage: dict[str, Any] | None = None  # the task's spend so far, in done.usage's shape


PlanPhase = Literal["created", "step_started", "step_finished", "replanned", "finished"]


@dataclass
class PlanEvent(Event):
    """A plan_execute agent's plan as it changes; `plan` is always the whole current plan:
    `{revision, steps: [{index, title, status, summary?}]}`."""

    name: ClassVar[str] = "plan"
    phase: PlanPhase
    plan: PlanMeta
    step: int | None = None
    status: StepStatus | None = None
    summary: str | None = None
    reason: str | None = None


ContextPhase = Literal["condensing", "condensed", "failed"]


@dataclass
class ContextEvent(Event):
    """The history being condensed: `condensing` (the summary call started), then `condensed`
    (`message_id` names the summary record, `first_kept_id` the first record still sent as it
    is) or `failed` (`message` says why; the context stays as it was)."""

    name: ClassVar[str] = "context"
    phase: ContextPhase
    trigger: Literal["threshold", "user"]
    tokens_before: int
    limit_tokens: int
    tokens_after: int | None = None
    message_id: str | None = None
    first_kept_id: str | None = None
    summarized: int | None = None  # records the summary replaces, earlier summaries' included
    summary: str | None = None
    message: str | None = None


@dataclass
class Notice(Event):
    """Something the user should know that does not end the task (a retry and its wait)."""

    name: ClassVar[str] = "notice"
    code: str
    message: str
    seconds: float | None = None


@dataclass
class Error(Event):
    name: ClassVar[str] = "error"
    code: str
    message: str


DoneReason = Literal[
    "complete", "cancelled", "max_iterations", "error", "interrupted", "budget", "loop"
]


@dataclass
class Done(Event):
    name: ClassVar[str] = "done"
    reason: DoneReason
    usage: Usage = field(default_factory=Usage)
    cost: Money | None = None  # the task's; None: a call's price unknown (§4.2, Cost)
    budget: dict[str, Any] | None = None  # a `budget` end's: BudgetReached.details()

    def usage_wire(self) -> TokenUsage:
        """`usage` as `done` sends it and task ends keep it, with `cost` (null: unknown)."""
        wire = self.usage.to_wire()
        wire["cost"] = None if self.cost is None else self.cost.to_wire()
        return wire

    def to_wire(self) -> dict[str, Any]:
        data = super().to_wire()
        data.pop("cost", None)
        usage = self.usage_wire()
        usage["estimated"] = self.usage.estimated  # always sent, as before costs (protocol §4.2)
        data["usage"] = usage
        return data


@dataclass
class FileTree(Event):
    name: ClassVar[str] = "file_tree"
    changes: list[FileChange]
    refresh: list[FolderRefresh] | None = None  # folders with more changes than were listed


@dataclass
class ConversationUpdate(Event):
    """A conversation started or ended a task, was renamed or deleted (§4.3), as a client
    reads it."""

    name: ClassVar[str] = "conversation_update"
    id: str
    running: bool | None = None
    title: str | None = None
    deleted: bool | None = None


ProcessPhase = Literal["started", "output", "ports", "exited"]


@dataclass
class Process(Event):
    """A background process of the conversation's sandbox session (§4.2): `started`, its
    `output` in batches (`delta` is the text from byte `offset`; `skipped` bytes before it were
    no longer kept), the `ports` it listens on, `exited` with its code or signal and why.
    Sent between tasks too: a process outlives the task that started it."""

    name: ClassVar[str] = "process"
    process_id: str
    phase: ProcessPhase
    command: str | None = None
    pid: int | None = None
    origin: str | None = None
    delta: str | None = None
    offset: int | None = None
    skipped: int | None = None
    ports: list[int] | None = None
    exit_code: int | None = None
    signal: int | None = None
    reason: str | None = None


@dataclass
class Unknown(Event):
    """An event this version does not know, or whose payload did not fit its class."""

    name: ClassVar[str] = "unknown"
    event: str
    payload: Any


# --- the decoder ----------------------------------------------------------------------------


def _fields(cls: type, payload: dict[str, Any]) -> dict[str, Any]:
    """The payload's keys that are fields of dataclass `cls` (a newer server may add others);
    raises TypeError for a payload that is no object."""
    if not isinstance(payload, dict):
        raise TypeError(f"{cls.__name__} comes as an object, not {type(payload).__name__}")
    names = {f.name for f in dataclasses.fields(cls)}
    return {key: value for key, value in payload.items() if key in names}


def done_from_wire(payload: dict[str, Any]) -> Done:
    """A `done` payload, or a `task_ends` entry (§5) with `conversation_id`/`seq` added."""
    wire = payload.get("usage")
    usage: dict[str, Any] = wire if isinstance(wire, dict) else {}
    fields = _fields(Done, payload)
    fields.update(usage=Usage.from_wire(usage), cost=Money.from_wire(usage.get("cost")))
    return Done(**fields)


def _tool(payload: dict[str, Any]) -> ToolEvent:
    return ToolEvent(**_fields(ToolEvent, {**payload, "tool": payload.get("name")}))


def _status(payload: dict[str, Any]) -> Status:
    fields = _fields(Status, payload)
    fields["context"] = ContextUsage(**_fields(ContextUsage, payload.get("context") or {}))
    return Status(**fields)


def _file_tree(payload: dict[str, Any]) -> FileTree:
    fields = _fields(FileTree, payload)
    fields["changes"] = [FileChange(**_fields(FileChange, c)) for c in payload["changes"]]
    if payload.get("refresh") is not None:
        refresh = payload["refresh"]
        fields["refresh"] = [FolderRefresh(**_fields(FolderRefresh, r)) for r in refresh]
    return FileTree(**fields)


def _plain(cls: type[Event]) -> Callable[[dict[str, Any]], Event]:
    return lambda payload: cls(**_fields(cls, payload))


_PARSERS: dict[str, Callable[[dict[str, Any]], Event]] = {
    "user_message": _plain(UserMessage),
    "token": _plain(Token),
    "thinking": _plain(Thinking),
    "tool": _tool,
    "status": _status,
    "plan": _plain(PlanEvent),
    "context": _plain(ContextEvent),
    "notice": _plain(Notice),
    "error": _plain(Error),
    "done": done_from_wire,
    "file_tree": _file_tree,
    "conversation_update": _plain(ConversationUpdate),
    "process": _plain(Process),
}


def parse_event(name: str, payload: Any) -> Event:
    """The typed event of a wire event; `Unknown` for anything that does not parse."""
    parser = _PARSERS.get(name)
    if parser is None or not isinstance(payload, dict):
        return Unknown(event=name, payload=payload)
    try:
        return parser(payload)
    except (TypeError, KeyError, ValueError):
        return Unknown(event=name, payload=payload)


def expand_deltas(payload: dict[str, Any]) -> list[Event]:
    """A `deltas` event (gathered token/thinking deltas, §4.2) as one event per delta."""
    cls = Token if payload.get("of") == "token" else Thinking
    common = _fields(cls, payload)
    common.pop("text", None)
    common.pop("seq", None)
    first = int(payload["first_seq"])
    return [
        cls(**common, text=text, seq=first + index)
        for index, text in enumerate(payload.get("texts") or [])
    ]
