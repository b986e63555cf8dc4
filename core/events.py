"""The events a task reports (docs/protocol.md §4), as plain dataclasses the fronts consume.

The core stamps each event with its conversation and `seq` and hands it to the sink it was
given; it becomes a dict only at a transport (`to_wire`: Socket.IO, the CLI's `--json`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field, is_dataclass
from typing import Any, ClassVar, Literal

from core.spend import Money, token_usage
from model.completion import Usage
from modules.results import FileChange, FolderRefresh
from protocol.records import TokenUsage


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

    def to_wire(self) -> dict[str, Any]:
        data = super().to_wire()
        data["name"] = data.pop("tool")
        return data


@dataclass
class ContextUsage:
    used_tokens: int
    limit_tokens: int


TaskState = Literal["idle", "thinking", "streaming", "tool"]


@dataclass
class Status(Event):
    name: ClassVar[str] = "status"
    state: TaskState
    iteration: int
    context: ContextUsage
    usage: dict[str, Any] | None = None  # the task's spend so far (core/spend.py Totals.to_wire)


PlanPhase = Literal["created", "step_started", "step_finished", "replanned", "finished"]


@dataclass
class PlanEvent(Event):
    """A plan_execute agent's plan as it changes; `plan` is always the whole current plan:
    `{revision, steps: [{index, title, status, summary?}]}`."""

    name: ClassVar[str] = "plan"
    phase: PlanPhase
    plan: dict[str, Any]
    step: int | None = None
    status: str | None = None
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
    cost: Money | None = None  # the task's; None: a call's price unknown (see core/spend.py)
    budget: dict[str, Any] | None = None  # a `budget` end's: BudgetReached.details()

    def usage_wire(self) -> TokenUsage:
        """`usage` as `done` sends it and task ends keep it, with `cost` (null: unknown)."""
        wire = token_usage(self.usage)
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


EventSink = Callable[[Event], None]
