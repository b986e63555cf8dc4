"""A refused request's answer, in one place: the exception it was refused with turned into the
`error` of `{ok: false, error: {code, message}}` (docs/protocol.md §4.4), which the Socket.IO
acks, the A2A rejections and the HTTP routes (with their status from HTTP_STATUS) send."""

from __future__ import annotations

import logging
import os
from typing import Any, Literal

from pydantic import ValidationError

from modules.uploads.file_types import UploadRefusal
from protocol.budgets import TOO_LARGE
from protocol.errors import ErrorCode, WireError, failure
from utils.disk import disk_full, is_disk_full
from utils.errors import AgentError
from utils.validation import describe_validation_error

log = logging.getLogger(__name__)

NOT_SAVED = "What you asked for could not be saved."

# The HTTP answers' own codes (§3, §7, §11) besides §4.4's.
HttpCode = (
    ErrorCode
    | UploadRefusal
    | Literal["bad_path", "not_an_image", "unauthorized", "too_many_attempts"]
)
HTTP_STATUS: dict[HttpCode, int] = {
    "bad_request": 400,
    "bad_path": 400,
    "unauthorized": 401,
    "not_found": 404,
    "not_running": 409,
    "not_waiting": 409,
    "busy": 409,
    "conflict": 409,
    "not_demo": 409,
    "too_large": 413,
    "unsupported": 415,
    "mismatch": 415,
    "not_an_image": 415,
    "invalid": 422,
    "zip_bomb": 422,
    "xml_entities": 422,
    "encrypted": 422,
    "corrupt": 422,
    "timeout": 422,
    "memory": 422,
    "too_many_attempts": 429,
    "internal_error": 500,
    "not_configured": 503,
    "unavailable": 503,
    "disk_full": 507,
}


def refusal(exc: Exception, doing: str) -> WireError:
    """What a request `doing` something was refused with: the code an AgentError carries,
    `bad_request` (or `invalid`, for a budget over the largest) for a payload that does not
    validate, `disk_full` for a write that found no space, else `internal_error`, logged."""
    if isinstance(exc, AgentError):
        return {"code": exc.code, "message": str(exc)}
    if isinstance(exc, ValidationError):
        too_large = all(item["type"] == TOO_LARGE for item in exc.errors())
        return {
            "code": "invalid" if too_large else "bad_request",
            "message": describe_validation_error(exc),
        }
    if is_disk_full(exc):  # a write outside a task's start (an upload's text, ...)
        where = os.path.dirname(getattr(exc, "filename", None) or "") or "the data folder"
        return {"code": "disk_full", "message": str(disk_full(where, NOT_SAVED))}
    log.error("%s failed", doing, exc_info=exc)
    return {"code": "internal_error", "message": f"{type(exc).__name__}: {exc}"}


def refused(exc: Exception, doing: str) -> dict[str, Any]:
    """The ack of a request refused with `exc` (its message cut short, as every ack's)."""
    return failure(**refusal(exc, doing))
