"""Budgets (docs/protocol.md §2 the settings, §8 an agent's `budget`, §4.1 send_message's
`budget_override`): a limit as they write it, tokens ('200000 tokens', '200k tokens', a bare
number) or money ('$0.50', '0.50 USD', '¥3', '3 CNY'), and the scope it limits."""

from __future__ import annotations

import math
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError

TOKENS = "tokens"
MAX_AMOUNT = 10**12  # the largest budget, in tokens or in money
TOO_LARGE = "budget_too_large"  # the error type of a well-formed budget over MAX_AMOUNT
_MULTIPLIERS = {"": 1, "k": 1_000, "m": 1_000_000}
_NUMBER = r"(\d[\d_,]*(?:\.\d+)?)"
_TOKEN_TEXT = re.compile(rf"^{_NUMBER}\s*([km]?)\s*(?:tokens?)?$", re.IGNORECASE)
_SIGNED = re.compile(rf"^([$¥€£])\s*{_NUMBER}$")
_CODED = re.compile(rf"^{_NUMBER}\s*([A-Z]{{3}})$")
SIGNS = {"$": "USD", "¥": "CNY", "€": "EUR", "£": "GBP"}
SYNTAX = (
    "write a budget as tokens ('200000 tokens', '200k tokens', '1.5m tokens') or as money "
    "('$0.50', '0.50 USD', '¥3', '3 CNY')"
)


class Budget(BaseModel):
    """A limit: so many tokens, or so much money in one currency (`unit`: "tokens" or an
    ISO 4217 code); at most MAX_AMOUNT of either."""

    model_config = ConfigDict(frozen=True)

    amount: float = Field(gt=0)
    unit: str = Field(pattern=r"^(tokens|[A-Z]{3})$")

    @model_validator(mode="before")
    @classmethod
    def _from_text(cls, data: Any) -> Any:
        if isinstance(data, bool):
            raise ValueError(SYNTAX)
        if isinstance(data, int | float):
            huge = isinstance(data, int) and data.bit_length() > 4_000  # whose str() may fail
            shown = "" if huge else str(data)
            return {"amount": _tokens(data, shown), "unit": TOKENS}
        if isinstance(data, str):
            return parse_budget(data)
        return data

    @model_validator(mode="after")
    def _in_range(self) -> Budget:
        if self.in_tokens:
            _tokens(self.amount, f"{self.amount:g} tokens")
        else:
            _at_most(self.amount, f"{self.amount:g} {self.unit}")
        return self

    @property
    def in_tokens(self) -> bool:
        return self.unit == TOKENS


BudgetScope = Literal["task", "conversation", "day"]


class BudgetOverride(BaseModel):
    """A higher limit for one scope, for one task (send_message `budget_override`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    scope: BudgetScope
    limit: Budget


def parse_budget(text: str) -> dict[str, Any]:
    """`{amount, unit}` of a budget's text; raises ValueError naming the syntax."""
    plain = text.strip()
    found = _TOKEN_TEXT.match(plain)
    if found is not None:
        number = _number(found.group(1)) * _MULTIPLIERS[found.group(2).lower()]
        return {"amount": _tokens(number, text), "unit": TOKENS}
    signed, coded = _SIGNED.match(plain), _CODED.match(plain)
    if signed is not None:
        return {"amount": _money(signed.group(2), text), "unit": SIGNS[signed.group(1)]}
    if coded is not None:
        return {"amount": _money(coded.group(1), text), "unit": coded.group(2)}
    raise ValueError(f"{_shown(plain)} is not a budget: {SYNTAX}")


def _number(text: str) -> float:
    return float(text.replace(",", "").replace("_", ""))


def _tokens(tokens: float, text: str) -> int:
    _at_most(tokens, text)
    if tokens < 1 or tokens != int(tokens):
        raise ValueError(f"{_shown(text)} is not a budget: tokens come whole, 1 or more ({SYNTAX})")
    return int(tokens)


def _money(figure: str, text: str) -> float:
    amount = _number(figure)
    _at_most(amount, text)
    if amount <= 0:
        raise ValueError(f"{_shown(text)} is not a budget: money above 0 ({SYNTAX})")
    return amount


def _at_most(amount: float, text: str) -> None:
    """Refuse what is no number (NaN) or more than MAX_AMOUNT (infinity, 1e400, huge ints)."""
    if isinstance(amount, float) and math.isnan(amount):
        raise ValueError(f"{_shown(text)} is not a budget: not a number ({SYNTAX})")
    if amount > MAX_AMOUNT:  # an int too long to turn into a float is compared as it is
        raise PydanticCustomError(
            TOO_LARGE,
            "{text} is over the largest budget, {most}",
            {"text": _shown(text) if text else "the number", "most": f"{MAX_AMOUNT:,}"},
        )


def _shown(text: str) -> str:
    """The budget's text as a message quotes it: a long one cut."""
    plain = text.strip()
    return repr(plain if len(plain) <= 40 else plain[:40] + "…")
