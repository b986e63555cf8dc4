"""What a failed model call is told as: the SDK's exceptions mapped to ours, which of them
are retried (and after how long a `Retry-After` asks), and why a stream came back empty."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from model.context_errors import context_too_long
from model.errors import (
    ApiError,
    AuthError,
    BadResponse,
    MalformedChunk,
    NetworkError,
    RateLimitError,
    RequestRejected,
    ServerError,
    StreamInterrupted,
)
from model.sse_pump import NotAStream
from model.stream_reading import CallState
from utils.cancel import CancelToken, run_bounded

if TYPE_CHECKING:
    import openai

logger = logging.getLogger(__name__)

EMPTY_STREAM = "The model API answered with an empty stream: no chunk, no reason."


class Retry(Exception):
    """A failure before any delta arrived that is worth another attempt."""

    def __init__(self, error: ApiError, retry_after: float | None) -> None:
        super().__init__(str(error))
        self.error = error
        self.retry_after = retry_after


def failure(error: Exception | None, state: CallState, base_url: str) -> Exception:
    """What a stream that ended unfinished raises: StreamInterrupted once a delta came (with
    what came), a Retry for a failure worth another attempt, else our error for it."""
    mapped = (
        map_error(error, base_url)
        if error is not None
        else NetworkError("The model stream ended before it finished.")
    )
    if state.received:
        return StreamInterrupted(f"The model stream broke off: {mapped}", state.completion())
    if isinstance(mapped, RateLimitError | ServerError | NetworkError):
        return Retry(mapped, _retry_after(error))
    return mapped


def map_error(error: Exception, base_url: str) -> ApiError:
    """Our error type for an SDK exception."""
    import openai

    if isinstance(error, NotAStream | MalformedChunk):
        return BadResponse(str(error))
    if isinstance(error, openai.APIStatusError):
        status, message = error.status_code, error.message
        if status in (401, 403):
            return AuthError(message)
        if status == 429:
            return RateLimitError(message)
        too_long = context_too_long(message, error.body)
        if too_long is not None:
            return too_long
        if status >= 500:
            return ServerError(message)
        return RequestRejected(message)
    if isinstance(error, openai.APIConnectionError):
        return NetworkError(f"Cannot reach the model API at {base_url}: {error}")
    if isinstance(error, openai.APIError):
        return ServerError(str(error))
    return ServerError(f"Malformed response from the model API: {error}")


def _retry_after(error: Exception | None) -> float | None:
    """Seconds a `Retry-After` header asks for; None when absent or not a number."""
    response = getattr(error, "response", None)
    value = response.headers.get("retry-after") if response is not None else None
    try:
        return max(float(value), 0.0) if value is not None else None
    except ValueError:
        return None


def why_empty(
    request: dict[str, Any],
    new_sdk: Callable[[], openai.OpenAI],
    cancel: CancelToken,
    limit: float,
) -> ApiError:
    """The error for a 200 with an empty stream: llama-cpp-python answers a streamed request
    over its context window so, its reason only in its log. The same request unstreamed,
    for one token and within `limit` seconds, is refused with the reason, which is what the
    user is told."""
    import openai

    logger.warning("empty model stream: asking again unstreamed to learn why")
    probe = {key: value for key, value in request.items() if not key.startswith("stream")}
    probe["extra_body"] = {**request["extra_body"], "max_tokens": 1}
    # On a connection of its own: llama-cpp-python's server resets the one the empty
    # stream came on (the request failed inside it), and a pooled one would be reused.
    sdk = new_sdk()
    try:
        run_bounded(lambda: sdk.chat.completions.create(**probe), cancel, limit, grace=0.0)
    except openai.APIStatusError as err:
        return context_too_long(err.message, err.body) or BadResponse(
            f"{EMPTY_STREAM} Asked again without streaming, it answered "
            f"{err.status_code}: {err.message}"
        )
    except (openai.APIError, TimeoutError) as err:
        return BadResponse(f"{EMPTY_STREAM} Asked again without streaming, it failed: {err}")
    finally:
        sdk.close()
    return BadResponse(
        f"{EMPTY_STREAM} Asked again without streaming, it answered without saying why; "
        "the server's log may."
    )
