"""What one model call produces: its stream items in arrival order, and the whole completion."""

from __future__ import annotations

from dataclasses import dataclass, field

from model.prices import Price
from model.tool_calls import ToolCall, ToolCallArgs, ToolCallStarted
from protocol.events import Usage


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


# Items yielded by a model stream, in arrival order; the last one is always StreamEnd.
StreamItem = ContentDelta | ReasoningDelta | ToolCallStarted | ToolCallArgs | StreamEnd
