"""Budgets that stop a task: a task's, a conversation's and a day's limit, in tokens or money.

Before each model call (its sub-agents' too) the task checks what each scope has used against
its limit: the task's own calls, the conversation's ended tasks and this one, and the day's
ledger of every call (core/spend.py). One that is reached ends the task between calls, so no
budget is passed by more than the one call that reached it. A call's tokens are its prompt's
and its answer's, as providers bill them; its money is what core/spend.py priced it at.

A money budget counts priced calls only: a call of this task whose price is unknown stops the
task before the next one, as a budget it cannot keep (the price setting names the model's).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from core.spend import Totals, money_text
from protocol.budgets import Budget, BudgetScope
from protocol.event_values import Money
from utils.errors import Invalid

SCOPES: tuple[BudgetScope, ...] = ("task", "conversation", "day")
WHOSE: dict[BudgetScope, str] = {
    "task": "this task has",
    "conversation": "this conversation has",
    "day": "today's tasks have",
}


def limit_text(limit: Budget) -> str:
    """`200,000 tokens` or `$0.50`."""
    if limit.in_tokens:
        return f"{int(limit.amount):,} tokens"
    return money_text(Money(limit.amount, limit.unit))


def used_of(totals: Totals, limit: Budget) -> float:
    """What `totals` come to in `limit`'s unit: tokens, or the priced calls' money in its
    currency."""
    if limit.in_tokens:
        return totals.usage.prompt_tokens + totals.usage.completion_tokens
    return totals.costs.get(limit.unit, 0.0)


def amount_of(figure: float, limit: Budget) -> float | int:
    """`figure` in `limit`'s unit as the wire says it: whole tokens, money to 6 places."""
    return int(figure) if limit.in_tokens else round(figure, 6)


@dataclass(frozen=True)
class Limits:
    """The limits a task runs under, one per scope (None: no limit)."""

    task: Budget | None = None
    conversation: Budget | None = None
    day: Budget | None = None

    def of(self, scope: BudgetScope) -> Budget | None:
        limit: Budget | None = getattr(self, scope)
        return limit

    def any_money(self) -> bool:
        return any(limit is not None and not limit.in_tokens for limit in self.all())

    def all(self) -> list[Budget | None]:
        return [self.of(scope) for scope in SCOPES]

    def raised(self, scope: BudgetScope, limit: Budget) -> Limits:
        """These limits with `scope`'s raised to `limit`; raises BudgetRefused when `scope`
        has no limit or `limit` is not a higher one in its unit (an override only raises)."""
        current = self.of(scope)
        if current is None:
            raise BudgetRefused(f"there is no {scope} budget to raise")
        if limit.unit != current.unit:
            raise BudgetRefused(
                f"the {scope} budget is {limit_text(current)}: raise it in the same unit"
            )
        if limit.amount <= current.amount:
            raise BudgetRefused(
                f"the raised {scope} budget ({limit_text(limit)}) must be higher than the "
                f"limit ({limit_text(current)})"
            )
        return Limits(**{**{s: self.of(s) for s in SCOPES}, scope: limit})


class BudgetRefused(Invalid):
    """An override that would not raise a limit: there is none, or it is not higher."""


class BudgetReached(Exception):
    """A scope's budget is used up: the task ends before its next model call."""

    def __init__(
        self, scope: BudgetScope, limit: Budget, totals: Totals, unpriced: int = 0
    ) -> None:
        self.scope, self.limit, self.totals, self.unpriced = scope, limit, totals, unpriced
        self.used = used_of(totals, limit)
        super().__init__(self._message())

    def _message(self) -> str:
        limit = limit_text(self.limit)
        estimate = " (estimated in part: the server sent no usage)"
        estimated = estimate if self.totals.usage.estimated else ""
        if self.unpriced:
            calls = "a model call" if self.unpriced == 1 else f"{self.unpriced} model calls"
            return (
                f"The {self.scope} budget of {limit} cannot be kept: {calls} of this task had "
                "no known price. The task stopped before its next model call; give the model "
                "a price in the prices setting (AGENT_PRICES), or use a budget in tokens."
            )
        if self.limit.in_tokens:
            used = f"{int(self.used):,} tokens{estimated}"
        else:
            used = money_text(Money(self.used, self.limit.unit), bool(estimated))
        return (
            f"The {self.scope} budget of {limit} is reached: {WHOSE[self.scope]} used {used}. "
            "The task stopped before its next model call; continue with a higher limit to go on."
        )

    def details(self) -> dict[str, Any]:
        """What `done.budget` and the task's end keep of it."""
        unit = self.limit.unit
        details: dict[str, Any] = {
            "scope": self.scope,
            "limit": {"amount": amount_of(self.limit.amount, self.limit), "unit": unit},
            "used": {"amount": amount_of(self.used, self.limit), "unit": unit},
        }
        if self.totals.usage.estimated:
            details["estimated"] = True
        if self.unpriced:
            details["unpriced_calls"] = self.unpriced
        return details


class BudgetGuard:
    """One task's limits, checked before each of its model calls (its sub-agents' too).

    `task` is the task's running total (TaskSpend.totals), `conversation` gives the
    conversation's ended tasks' totals, `day` today's calls (this task's among them), both
    read again at every check.
    """

    def __init__(
        self,
        limits: Limits,
        task: Totals,
        conversation: Callable[[], Totals],
        day: Callable[[], Totals],
    ) -> None:
        self.limits = limits
        self._task = task
        self._conversation = conversation
        self._day = day

    def check(self) -> None:
        """Raise BudgetReached when a limit is reached."""
        task = self._task
        for scope in SCOPES:
            limit = self.limits.of(scope)
            if limit is None:
                continue
            if not limit.in_tokens and task.unpriced_calls:
                raise BudgetReached(scope, limit, task, task.unpriced_calls)
            totals = self._totals(scope, task)
            if used_of(totals, limit) >= limit.amount:
                raise BudgetReached(scope, limit, totals)

    def _totals(self, scope: BudgetScope, task: Totals) -> Totals:
        if scope == "day":
            return self._day()
        if scope == "task":
            return task
        totals = Totals()
        totals.merge(self._conversation())
        totals.merge(task)
        return totals
