"""What model calls cost: one call's cost, a task's running total, a conversation's and today's.

A cost is None when the price of a call's model is unknown ("price unknown", never $0). Totals
keep the tokens and the cost of each currency apart, and count the calls whose price is
unknown: `Totals.cost` is one Money only when every call was priced in one currency; a budget
may still read `costs` (what the priced calls came to) and `unpriced_calls`.

Today's total is read from a ledger in the data dir, one JSON line per model call appended as
the call ends (`spend/YYYY-MM-DD.jsonl`, the local date): exact after a restart, shared by
every process on the data dir (each line is one O_APPEND write), and read one day at a time.
"""

from __future__ import annotations

import json
import logging
import math
import os
import threading
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

from history.context_builder import estimate_message_tokens, estimate_text_tokens
from history.conversation import Conversation
from model.completion import Completion
from model.messages import ChatMessage
from model.prices import Price
from protocol.event_values import Money, Usage

log = logging.getLogger(__name__)


def cost_of(usage: Usage, price: Price | None) -> Money | None:
    """What `usage` costs at `price`: cached prompt tokens at the cached rate; None: unknown."""
    if price is None:
        return None
    cached = min(usage.cached_prompt_tokens, usage.prompt_tokens)
    millionths = (
        (usage.prompt_tokens - cached) * price.input
        + cached * price.cached_input
        + usage.completion_tokens * price.output
    )
    return Money(millionths / 1_000_000, price.currency)


@dataclass
class Totals:
    """Tokens and cost of some model calls (a task's, a conversation's, a day's)."""

    usage: Usage = field(default_factory=Usage)
    costs: dict[str, float] = field(default_factory=dict)  # currency -> amount
    unpriced_calls: int = 0  # calls (or tasks) with tokens whose price is unknown

    def add(self, usage: Usage, cost: Money | None) -> None:
        self.usage.add(usage)
        if cost is not None:
            self.costs[cost.currency] = self.costs.get(cost.currency, 0.0) + cost.amount
        elif usage.prompt_tokens or usage.completion_tokens:
            self.unpriced_calls += 1

    def merge(self, other: Totals) -> None:
        self.usage.add(other.usage)
        for currency, amount in other.costs.items():
            self.costs[currency] = self.costs.get(currency, 0.0) + amount
        self.unpriced_calls += other.unpriced_calls

    @property
    def empty(self) -> bool:
        """No call counted yet: nothing spent, and nothing to price."""
        tokens = self.usage.prompt_tokens or self.usage.completion_tokens
        return not (self.costs or self.unpriced_calls or tokens)

    @property
    def cost(self) -> Money | None:
        """The whole cost, or None when a call's price is unknown or currencies are mixed."""
        if self.unpriced_calls or len(self.costs) > 1:
            return None
        for currency, amount in self.costs.items():
            return Money(amount, currency)
        return None  # no call yet: nothing to price

    def to_wire(self) -> dict[str, Any]:
        """{prompt_tokens, completion_tokens, cached_prompt_tokens?, estimated?, cost}, the
        shape of `done.usage`, `/status` and meta.json's totals."""
        wire: dict[str, Any] = dict(self.usage.to_wire())
        cost = self.cost
        wire["cost"] = None if cost is None else cost.to_wire()
        return wire

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> Totals:
        """One `to_wire` (a task's end as meta.json keeps it) back as Totals."""
        totals = cls()
        totals.add(Usage.from_wire(data), Money.from_wire(data.get("cost")))
        return totals


class Ledger:
    """The data dir's record of every model call's tokens and cost, a file per local day."""

    def __init__(self, data_dir: Path) -> None:
        self.folder = Path(data_dir) / "spend"
        self._lock = threading.Lock()

    def path(self, day: date) -> Path:
        return self.folder / f"{day.isoformat()}.jsonl"

    def append(self, conversation_id: str, model: str, usage: Usage, cost: Money | None) -> None:
        """Record one call; a disk that refuses it loses only this line, not the task."""
        entry = Totals()
        entry.add(usage, cost)
        line = {
            "at": datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
            "conversation_id": conversation_id,
            "model": model,
            **entry.to_wire(),
        }
        data = (json.dumps(line, ensure_ascii=False) + "\n").encode()
        try:
            with self._lock:
                self.folder.mkdir(parents=True, exist_ok=True)
                fd = os.open(self.path(date.today()), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
                try:
                    os.write(fd, data)
                finally:
                    os.close(fd)
        except OSError:
            log.exception("could not record a model call's spend")

    def totals(self, day: date) -> Totals:
        totals = Totals()
        try:
            text = self.path(day).read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return totals
        for line in text.splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue  # a line cut by a full disk
            if isinstance(entry, dict):
                totals.merge(Totals.from_wire(entry))
        return totals


def today_totals(data_dir: Path) -> Totals:
    """Every model call of today (local date), across conversations and processes."""
    return Ledger(data_dir).totals(date.today())


def conversation_totals(conversation: Conversation) -> Totals:
    """The conversation's finished tasks, summed from meta.json's `task_ends`."""
    totals = Totals()
    ends = conversation.current_meta().get("meta", {}).get("task_ends") or {}
    for end in ends.values():
        usage = end.get("usage") if isinstance(end, dict) else None
        if isinstance(usage, dict):
            totals.merge(Totals.from_wire(dict(usage)))
    return totals


@dataclass
class TaskSpend:
    """A task's running total (its sub-agents' calls included), each call also in the ledger."""

    ledger: Ledger
    conversation_id: str
    totals: Totals = field(default_factory=Totals)

    def record(self, model: str, usage: Usage, price: Price | None) -> Money | None:
        cost = cost_of(usage, price)
        self.totals.add(usage, cost)
        self.ledger.append(self.conversation_id, model, usage, cost)
        return cost


CURRENCY_SIGNS = {"USD": "$", "CNY": "¥", "EUR": "€", "GBP": "£"}


def money_text(cost: Money | None, estimated: bool = False) -> str:
    """`$0.0123`, `~¥1.20 (estimated)`, or `price unknown` (never `$0`)."""
    if cost is None:
        return "price unknown"
    digits = 2 if cost.amount >= 1 else 4
    sign = CURRENCY_SIGNS.get(cost.currency)
    figure = (
        f"{sign}{cost.amount:.{digits}f}" if sign else f"{cost.amount:.{digits}f} {cost.currency}"
    )
    return f"~{figure} (estimated)" if estimated else figure


def spend_text(usage: Usage, cost: Money | None) -> str:
    """`1,234 in · 56 out · $0.0012`, each figure `~` when estimated; `0 in · 0 out` alone when
    no call was made (no call, no price to speak of)."""
    about = "~" if usage.estimated else ""
    tokens = f"{about}{usage.prompt_tokens:,} in · {about}{usage.completion_tokens:,} out"
    if usage.cached_prompt_tokens:
        tokens += f" ({usage.cached_prompt_tokens:,} cached)"
    if not (usage.prompt_tokens or usage.completion_tokens):
        return tokens
    return f"{tokens} · {money_text(cost, usage.estimated)}"


def counted(usage: Usage) -> bool:
    """Whether the server counted the call's tokens (llama.cpp's sends no `usage`, even when
    asked)."""
    return bool(usage.prompt_tokens or usage.completion_tokens)


def estimated_usage(prompt_estimate: int, completion: Completion) -> Usage:
    """What a call used, estimated as the context is, for a server that counted nothing."""
    written = completion.content + completion.reasoning_content
    written += "".join(call.name + call.arguments for call in completion.tool_calls)
    produced = math.ceil(estimate_text_tokens(written)) if written else 0
    return Usage(prompt_estimate, produced, estimated=True)


def estimated_prompt(messages: list[ChatMessage]) -> int:
    """The uncorrected estimate of a request's messages."""
    return math.ceil(sum(estimate_message_tokens(message) for message in messages))
