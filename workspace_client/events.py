"""The wire's events (docs/protocol.md §4.2, §4.3) as the core's own dataclasses (core/events.py).

`parse_event(name, payload)` never raises on what a newer server may send: a field this
version does not know is left out, an event it does not know (or one whose payload does not
fit) comes as `Unknown(name, payload)`. Two events are the client's own: `ConversationUpdate`
(§4.3) and `Reloaded`, what a reconnect read from the history when the server could not
replay the gap.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from core.events import (
    ContextEvent,
    ContextUsage,
    Done,
    Error,
    Event,
    FileTree,
    Notice,
    PlanEvent,
    Status,
    Thinking,
    Token,
    ToolEvent,
)
from core.spend import Money
from model.completion import Usage
from modules.results import FileChange, FolderRefresh


@dataclass
class Unknown(Event):
    """An event this client does not know, or whose payload did not fit its class."""

    name: ClassVar[str] = "unknown"
    event: str
    payload: Any


@dataclass
class ConversationUpdate(Event):
    """A conversation started or ended a task, was renamed or deleted (§4.3)."""

    name: ClassVar[str] = "conversation_update"
    id: str
    running: bool | None = None
    title: str | None = None
    deleted: bool | None = None


@dataclass
class Reloaded(Event):
    """The server could not replay what the connection missed (it restarted, or the task's
    log had moved on): `messages` are the conversation's records as get_conversation gave
    them after the reconnect, `running` whether a task still runs. A top-level `Done` follows
    when the task this client followed has ended."""

    name: ClassVar[str] = "reloaded"
    messages: list[dict[str, Any]] = field(default_factory=list)
    running: bool = False


def _fields(cls: type, payload: dict[str, Any]) -> dict[str, Any]:
    """The payload's keys that are fields of dataclass `cls` (a newer server may add others)."""
    names = {f.name for f in dataclasses.fields(cls)}
    return {key: value for key, value in payload.items() if key in names}


def _usage(wire: dict[str, Any] | None) -> Usage:
    wire = wire or {}
    return Usage(
        prompt_tokens=int(wire.get("prompt_tokens") or 0),
        completion_tokens=int(wire.get("completion_tokens") or 0),
        estimated=bool(wire.get("estimated", False)),
        cached_prompt_tokens=int(wire.get("cached_prompt_tokens") or 0),
    )


def _money(wire: Any) -> Money | None:
    if not isinstance(wire, dict):
        return None
    return Money(amount=float(wire["amount"]), currency=str(wire["currency"]))


def done_from_wire(payload: dict[str, Any]) -> Done:
    """A `done` payload, or a `task_ends` entry (§5) with `conversation_id`/`seq` added."""
    wire = payload.get("usage")
    usage: dict[str, Any] = wire if isinstance(wire, dict) else {}
    fields = _fields(Done, payload)
    fields.update(usage=_usage(usage), cost=_money(usage.get("cost")))
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
