"""What a model call can fail with; each error's `code` goes into the `error` event."""

from __future__ import annotations

from model.completion import Completion


class ApiError(Exception):
    """Base of every model-API failure; `code` goes into the `error` event."""

    code = "api_error"


class NetworkError(ApiError):
    code = "network_error"


class RateLimitError(ApiError):
    code = "rate_limited"


class AuthError(ApiError):
    code = "auth_error"


class RequestRejected(ApiError):
    """The API refused the request as invalid (400/422): a bug on our side or a provider rule."""

    code = "request_rejected"


class ContextTooLong(RequestRejected):
    """The request is longer than the model's context window: the server refused it."""

    code = "context_too_long"


class ServerError(ApiError):
    code = "server_error"


class BadResponse(ApiError):
    """The API answered with something that is not a chat stream: a page, a whole JSON
    reply, chunks of the wrong shape, an empty stream. Retrying would get the same."""

    code = "bad_response"


class MalformedChunk(ValueError):
    """A stream chunk that is not the JSON object the chat-completions stream promises."""


class StreamInterrupted(ApiError):
    """The stream broke after deltas arrived; `partial` holds what arrived."""

    code = "stream_interrupted"

    def __init__(self, message: str, partial: Completion) -> None:
        super().__init__(message)
        self.partial = partial
