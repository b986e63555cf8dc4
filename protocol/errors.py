"""The codes of a refused request (docs/protocol.md §4.4) and the ack that refuses it."""

from __future__ import annotations

from typing import Any, Literal, TypedDict

ErrorCode = Literal[
    "bad_request",  # the payload does not match
    "not_found",
    "busy",  # a task or a condensation is running
    "not_running",
    "not_waiting",
    "not_configured",  # the model is not configured; the message says what to set
    "not_demo",  # demo_reset where the demo's sample workspace is not what is open
    "conflict",
    "invalid",
    "unavailable",  # the shared store of §13 does not answer
    "disk_full",  # a write to the data folder found no space: nothing was kept
    "internal_error",
]
ECHO_CHARS = 500  # what a message may echo of the request, at most


class WireError(TypedDict):
    """The `error` of `{ok: false, error: {code, message}}`, a refused request's ack."""

    code: ErrorCode
    message: str  # a sentence for a person


def failure(code: ErrorCode, message: str) -> dict[str, Any]:
    """A refused request's ack; what it echoes of the request stays short."""
    if len(message) > ECHO_CHARS:
        message = message[: ECHO_CHARS - 1] + "…"
    error: WireError = {"code": code, "message": message}
    return {"ok": False, "error": error}
