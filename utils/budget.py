"""A budget's limit as settings and agent files write it: tokens ('200000 tokens', '200k
tokens', a bare number) or money ('$0.50', '0.50 USD', '¥3', '3 CNY')."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

TOKENS = "tokens"
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
    ISO 4217 code)."""

    model_config = ConfigDict(frozen=True)

    amount: float = Field(gt=0)
    unit: str = Field(pattern=r"^(tokens|[A-Z]{3})$")

    @model_validator(mode="before")
    @classmethod
    def _from_text(cls, data: Any) -> Any:
        if isinstance(data, bool):
            raise ValueError(SYNTAX)
        if isinstance(data, int | float):
            return {"amount": _tokens(float(data), str(data)), "unit": TOKENS}
        if isinstance(data, str):
            return parse_budget(data)
        return data

    @model_validator(mode="after")
    def _whole_tokens(self) -> Budget:
        if self.in_tokens:
            _tokens(self.amount, f"{self.amount:g} tokens")
        return self

    @property
    def in_tokens(self) -> bool:
        return self.unit == TOKENS


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
    raise ValueError(f"{plain!r} is not a budget: {SYNTAX}")


def _number(text: str) -> float:
    return float(text.replace(",", "").replace("_", ""))


def _tokens(tokens: float, text: str) -> int:
    if tokens < 1 or tokens != int(tokens):
        raise ValueError(
            f"{text.strip()!r} is not a budget: tokens come whole, 1 or more ({SYNTAX})"
        )
    return int(tokens)


def _money(figure: str, text: str) -> float:
    amount = _number(figure)
    if amount <= 0:
        raise ValueError(f"{text.strip()!r} is not a budget: money above 0 ({SYNTAX})")
    return amount
