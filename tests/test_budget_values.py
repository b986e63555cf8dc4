"""A budget's value as settings, agent files and `budget_override` write it: whatever number it
is (infinite, NaN, 1e400, an integer of hundreds of digits), a bad one is a validation error
saying so, never an exception that escapes the code reading it."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from protocol.budgets import MAX_AMOUNT, TOO_LARGE, Budget, BudgetOverride
from utils.settings import Settings


@pytest.mark.parametrize(
    ("value", "amount", "unit"),
    [
        ("200k tokens", 200_000, "tokens"),
        ("1.5m tokens", 1_500_000, "tokens"),
        (12, 12, "tokens"),
        ("$0.50", 0.5, "USD"),
        ("3 CNY", 3, "CNY"),
        ({"amount": 2, "unit": "EUR"}, 2, "EUR"),
        (MAX_AMOUNT, MAX_AMOUNT, "tokens"),
    ],
)
def test_budgets_read_as_written(value: object, amount: float, unit: str) -> None:
    budget = Budget.model_validate(value)
    assert (budget.amount, budget.unit) == (amount, unit)


@pytest.mark.parametrize(
    "value",
    [
        float("inf"),
        1e400,
        10**400,
        10**5000,
        MAX_AMOUNT + 1,
        "9" * 400 + " tokens",
        "1,000,001m tokens",
        "$" + "9" * 400,
        {"amount": float("inf"), "unit": "tokens"},
        {"amount": "1e400", "unit": "USD"},
        {"amount": 1e300, "unit": "USD"},
    ],
    ids=lambda value: type(value).__name__,  # str() of a 5,000-digit integer raises
)
def test_a_budget_over_the_largest_is_refused_as_too_large(value: object) -> None:
    with pytest.raises(ValidationError) as caught:
        Budget.model_validate(value)
    assert [error["type"] for error in caught.value.errors()] == [TOO_LARGE]
    assert "over the largest budget, 1,000,000,000,000" in str(caught.value)


@pytest.mark.parametrize(
    "value",
    [
        float("nan"),
        {"amount": float("nan"), "unit": "USD"},
        -5,
        0,
        0.5,
        "1e999 tokens",
        True,
        "lots",
    ],
)
def test_what_is_no_budget_is_a_plain_validation_error(value: object) -> None:
    with pytest.raises(ValidationError) as caught:
        Budget.model_validate(value)
    assert TOO_LARGE not in [error["type"] for error in caught.value.errors()]


def test_settings_and_overrides_refuse_them_too() -> None:
    for value in (float("inf"), "9" * 400 + " tokens"):
        with pytest.raises(ValidationError, match="budget_task"):
            Settings(budget_task=value)
    with pytest.raises(ValidationError, match="over the largest budget"):
        BudgetOverride.model_validate(
            {"scope": "task", "limit": {"amount": 1e400, "unit": "tokens"}}
        )
