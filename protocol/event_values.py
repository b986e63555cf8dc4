"""The values the server's events carry (protocol/events.py): a call's tokens, an amount of
money, a change in the workspace, how full the context window is."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from protocol.records import MoneyWire, TokenUsage


@dataclass
class Usage:
    """A model call's tokens, or the sum of some calls'."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    estimated: bool = False  # our estimate, for a server that sent no `usage` (or its part)
    cached_prompt_tokens: int = 0  # of prompt_tokens, those the provider read from its cache

    def add(self, other: Usage) -> None:
        self.prompt_tokens += other.prompt_tokens
        self.cached_prompt_tokens += other.cached_prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.estimated = self.estimated or other.estimated

    def to_wire(self) -> TokenUsage:
        """As records and task ends keep it: `estimated` and the cached tokens only when
        there are."""
        kept: TokenUsage = {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
        }
        if self.cached_prompt_tokens:
            kept["cached_prompt_tokens"] = self.cached_prompt_tokens
        if self.estimated:
            kept["estimated"] = True
        return kept

    @classmethod
    def from_wire(cls, data: Any) -> Usage:
        """A `usage` as `done`, records and task ends send it (anything else: none used)."""
        wire: dict[str, Any] = data if isinstance(data, dict) else {}
        return cls(
            prompt_tokens=int(wire.get("prompt_tokens") or 0),
            completion_tokens=int(wire.get("completion_tokens") or 0),
            estimated=bool(wire.get("estimated")),
            cached_prompt_tokens=int(wire.get("cached_prompt_tokens") or 0),
        )


@dataclass(frozen=True)
class Money:
    amount: float
    currency: str

    def to_wire(self) -> MoneyWire:
        return {"amount": round(self.amount, 6), "currency": self.currency}

    @classmethod
    def from_wire(cls, data: Any) -> Money | None:
        """A `cost`; None for null (a price unknown) or anything that is no cost."""
        if not isinstance(data, dict):
            return None
        amount, currency = data.get("amount"), data.get("currency")
        if isinstance(amount, int | float) and isinstance(currency, str):
            return cls(float(amount), currency)
        return None


@dataclass
class FileChange:
    event: Literal["created", "modified", "deleted", "moved"]
    path: str
    is_dir: bool = False
    dest_path: str | None = None


@dataclass
class FolderRefresh:
    """A folder whose `count` changes in one batch were too many to list: reload it."""

    path: str
    count: int


@dataclass
class ContextUsage:
    used_tokens: int
    limit_tokens: int
