"""The one way a pydantic validation failure is told to a user, a client or the model."""

from __future__ import annotations

from pydantic import ValidationError


def describe_validation_error(error: ValidationError, whole: str = "payload") -> str:
    """`field.sub: problem; ...` for every problem found; `whole` names a problem of the whole."""
    return "; ".join(
        f"{'.'.join(map(str, item['loc'])) or whole}: {item['msg']}" for item in error.errors()
    )
