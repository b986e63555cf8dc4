"""What one model call produces: its stream items in arrival order, and the whole completion."""

from __future__ import annotations

from dataclasses import dataclass, field

from model.prices import Price
from model.tool_calls import ToolCall, ToolCallArgs, ToolCallStarted


@dataclass
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    estimated: bool = False  # our estimate, for a server that sent no `usage` (or its part)
    cached_prompt_tokens: int = 0  # of prompt_tokens, those the provider read from its cache

    def add(self, other: Usage) -> None:
        self.prompt_tokens += other.prompt_tokens
        self.cached_prompt_tokens += other.cached_prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.estimated = self.estimated or other.estimated


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
