"""What one model call produces: its stream items in arrival order, and the whole completion."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NotRequired, TypedDict

from model.prices import Price
from model.tool_calls import ToolCall, ToolCallArgs, ToolCallStarted
from protocol.event_values import Usage
from utils.cancel import CancelToken

OnWait = Callable[[float, str], None]  # (seconds, what failed and how long it waits)


class CallOptions(TypedDict):
    """How one model call is made: whether it thinks, what stops it, who hears of a wait
    before a retry, and the tool it must call (asked in `tool_choice` where the provider
    takes it)."""

    thinking: bool
    cancel: CancelToken
    on_wait: NotRequired[OnWait | None]
    require: NotRequired[str | None]


@dataclass
class Completion:
    content: str = ""
    reasoning_content: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    finish_reason: str | None = None
    model: str = ""  # the model asked
    price: Price | None = None  # that model's price; None: unknown


@dataclass
class ContentDelta:
    text: str


@dataclass
class ReasoningDelta:
    text: str


@dataclass
class StreamEnd:
    completion: Completion


@dataclass
class CallStarted:
    """The model a call asks and its price, said before any delta (so a reply cut short can
    be counted against it)."""

    model: str
    price: Price | None


# Items yielded by a model stream, in arrival order (a client may first say CallStarted); the
# last one is always StreamEnd.
StreamItem = (
    CallStarted | ContentDelta | ReasoningDelta | ToolCallStarted | ToolCallArgs | StreamEnd
)
