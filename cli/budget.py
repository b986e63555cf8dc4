"""`/continue [--raise LIMIT]`: go on after a task that stopped, with the budget that stopped it
raised to LIMIT for that one task."""

from __future__ import annotations

from typing import Any, Protocol

from pydantic import ValidationError

from protocol.budgets import Budget, BudgetOverride
from protocol.events import DoneReason
from utils.validation import describe_validation_error

CONTINUE = "continue"  # what the page's Continue sends too
USAGE = "usage: /continue [--raise LIMIT], e.g. /continue --raise 400k tokens"


class Continues(Protocol):
    """A terminal, local or remote: the budget its last task stopped at, and a way to go on."""

    last_budget: dict[str, Any] | None

    def run_foreground(
        self, text: str, budget_override: BudgetOverride | None = None
    ) -> DoneReason: ...


def continue_command(terminal: Continues, arg: str) -> str:
    """Send `continue`; with `--raise LIMIT`, the budget the last task reached is LIMIT for it."""
    override = None
    if arg:
        flag, _, limit = arg.partition(" ")
        if flag != "--raise" or not limit.strip():
            raise ValueError(USAGE)
        reached = terminal.last_budget
        if reached is None:
            raise ValueError(
                "the last task did not stop at a budget: /continue goes on without --raise"
            )
        try:
            override = BudgetOverride(
                scope=reached["scope"], limit=Budget.model_validate(limit.strip())
            )
        except ValidationError as exc:
            raise ValueError(describe_validation_error(exc)) from None
    terminal.run_foreground(CONTINUE, budget_override=override)
    return ""
