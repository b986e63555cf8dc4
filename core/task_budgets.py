"""A task's budgets and cost: the limits it runs under, the guard that holds them, what it cost."""

from __future__ import annotations

from datetime import date

from core.agent_specs import AgentSpec
from core.budgets import BudgetGuard, Limits
from core.spend import Ledger, Totals, conversation_totals
from history.conversation import Conversation
from model.prices import price_for
from protocol.budgets import BudgetOverride
from protocol.event_values import Money
from utils.settings import Settings


def task_limits(settings: Settings, agent: AgentSpec, override: BudgetOverride | None) -> Limits:
    """The budgets a task of `agent` runs under: the settings', the agent's own task budget
    instead of the settings' one, and `override` raising one of them."""
    limits = Limits(
        agent.budget or settings.budget_task,
        settings.budget_conversation,
        settings.budget_day,
    )
    return limits if override is None else limits.raised(override.scope, override.limit)


def budget_guard(
    limits: Limits, conversation: Conversation, task: Totals, ledger: Ledger
) -> BudgetGuard | None:
    """The guard of `limits` over the task's, the conversation's and today's spend; None when
    no limit is set."""
    if limits == Limits():
        return None
    return BudgetGuard(
        limits,
        task,
        lambda: conversation_totals(conversation),
        lambda: ledger.totals(date.today()),
    )


def task_cost(totals: Totals, model: str, settings: Settings) -> Money | None:
    """What a task's calls cost; one that made none cost exactly 0 where the model's price,
    so its currency, is known."""
    if not totals.empty:
        return totals.cost
    price = price_for(model, settings.prices)
    return None if price is None else Money(0.0, price.currency)
