"""OpenAI-compatible streaming client: providers' quirks, retries, cancellation."""

from __future__ import annotations

import contextlib
import json
import logging
import random
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from history.records import ChatMessage
from model.completion import (
    Completion,
    ContentDelta,
    ReasoningDelta,
    StreamEnd,
    StreamItem,
    Usage,
)
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
from model.prices import price_for
from model.providers import PreparedMessages, ProviderConfig
from model.sse_pump import ChunkPump, NotAStream
from model.tls_context import TlsContext
from model.tool_calls import ToolCallAssembler
from utils.cancel import CancelToken, TaskCancelled, run_bounded
from utils.settings import Settings

if TYPE_CHECKING:
    import openai

logger = logging.getLogger(__name__)

RETRY_AFTER_CAP = 60.0  # a longer Retry-After is told to the user, and waited only this long
EMPTY_STREAM = "The model API answered with an empty stream: no chunk, no reason."
OnWait = Callable[[float, str], None]  # (seconds, what failed and how long it waits)


@dataclass
class _CallState:
    """What one model call has produced so far."""

    content: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    assembler: ToolCallAssembler = field(default_factory=ToolCallAssembler)
    usage: Usage = field(default_factory=Usage)
    finish_reason: str | None = None
    tool_calls_seen: bool = False  # `delta.tool_calls` came: a legacy `function_call` repeats them
    received: bool = False
    started: float = field(default_factory=time.monotonic)
    first_delta: float | None = None

    def completion(self) -> Completion:
        return Completion(
            "".join(self.content),
            "".join(self.reasoning),
            self.assembler.calls(),
            self.usage,
            self.finish_reason,
        )


class _Retry(Exception):
    """A failure before any delta arrived that is worth another attempt."""

    def __init__(self, error: ApiError, retry_after: float | None) -> None:
        super().__init__(str(error))
        self.error = error
        self.retry_after = retry_after


class ApiClient:
    """Streams chat completions from the configured provider, with retries and cancel."""

    def __init__(
        self,
        config: ProviderConfig,
        settings: Settings,
        *,
        on_raw_delta: Callable[[str], None] | None = None,
    ) -> None:
        self.config = config
        self._settings = settings
        self._on_raw_delta = on_raw_delta
        self._prepare = PreparedMessages(config)
        self._sdk: openai.OpenAI | None = None  # built on the first call: see _client
        self._tls = TlsContext(trust_env=settings.use_proxy) if config.configured else None
        self._sdk_lock = threading.Lock()

    def _client(self) -> openai.OpenAI:
        """The SDK client, built on the first call (or by `warm`): importing `openai` is the
        largest single cost of start-up, and a command that never calls the model skips it."""
        with self._sdk_lock:
            if self._sdk is None:
                import httpx2

                try:
                    self._sdk = self._build_sdk()
                except httpx2.InvalidURL as exc:  # once a crash at start-up, now this call's error
                    raise ApiError(
                        f"The model API base URL {self.config.base_url!r} is not valid: {exc}"
                    ) from exc
            return self._sdk

    def warm(self) -> None:
        """Build the SDK client now, ahead of the first call (a server before it listens, the
        interactive CLI while the first prompt is typed). A problem is left to that call."""
        if self.config.configured:
            with contextlib.suppress(ApiError):
                _ = self._client().chat.completions  # its resource modules import on first use

    def _build_sdk(self) -> openai.OpenAI:
        import openai

        timeout = openai.Timeout(
            self._settings.request_timeout, connect=min(self._settings.request_timeout, 15.0)
        )
        http_client = openai.DefaultHttpxClient(
            verify=self._tls.get() if self._tls is not None else True,
            trust_env=self._settings.use_proxy,
            timeout=timeout,
        )
        return openai.OpenAI(
            api_key=self.config.api_key or "not-needed",
            base_url=self.config.base_url,
            max_retries=0,
            timeout=timeout,
            http_client=http_client,
        )

    def close(self) -> None:
        """Release the HTTP connections."""
        with self._sdk_lock:
            sdk = self._sdk
        if sdk is not None:
            sdk.close()

    def stream(
        self,
        messages: Sequence[ChatMessage],
        tools: list[dict[str, Any]],
        *,
        thinking: bool,
        cancel: CancelToken,
        on_wait: OnWait | None = None,
        require: str | None = None,
    ) -> Iterator[StreamItem]:
        """Stream one model call: every delta as it arrives, then StreamEnd(Completion).

        Before a retry, `on_wait(seconds, message)` says what failed and how long it waits.
        `require` names the tool the call must call, asked for in `tool_choice` where the
        provider takes it.
        """
        if not self.config.configured:
            raise AuthError(self.config.problem or "The model provider is not configured.")
        request = self._request(messages, tools, thinking, require)
        attempt = 0
        while True:
            attempt += 1
            state = _CallState()
            try:
                for item in self._attempt(request, cancel, state):
                    if isinstance(item, StreamEnd):
                        self._log(request, state, attempt, "ok")
                    yield item
            except _Retry as retry:
                self._log(request, state, attempt, retry.error.code)
                if attempt > self._settings.max_retries:
                    raise retry.error from retry.__cause__
                self._pause(retry, attempt, cancel, on_wait)
                continue
            except TaskCancelled:
                self._log(request, state, attempt, "cancelled")
                raise
            except ApiError as err:
                self._log(request, state, attempt, err.code)
                raise
            return

    def _request(
        self,
        messages: Sequence[ChatMessage],
        tools: list[dict[str, Any]],
        thinking: bool,
        require: str | None,
    ) -> dict[str, Any]:
        # The SDK walks every parameter against its typed schema before encoding it: a no-op on
        # these plain dicts that costs some 40 times their encoding, so a long history's
        # calls spent most of the server's CPU there. `extra_body` is sent as given, in place.
        body: dict[str, Any] = {"messages": self._prepare(messages)}
        if tools:
            body["tools"] = tools
            body.update(self.config.tool_choice_body(require, thinking))
        body.update(self.config.thinking_body(thinking))
        return {
            "model": self.config.model_for(thinking),
            "messages": [],
            "stream": True,
            "stream_options": {"include_usage": True},
            "extra_body": body,
        }

    def _attempt(
        self, request: dict[str, Any], cancel: CancelToken, state: _CallState
    ) -> Iterator[StreamItem]:
        cancel.raise_if_cancelled()
        sdk = self._client()
        import httpx2
        import openai

        pump = ChunkPump(lambda: sdk.chat.completions.with_streaming_response.create(**request))
        unregister = cancel.on_cancel(pump.close)
        error: Exception | None = None
        try:
            for data in pump:
                yield from self._read_chunk(data, state)
        except (openai.APIError, httpx2.HTTPError, ValueError) as err:  # ValueError: bad chunk
            error = err
        finally:
            unregister()
            pump.close()
        cancel.raise_if_cancelled()
        if error is None and not pump.payloads:
            raise self._why_empty(request, cancel)
        # A break after the finish is only missing usage; `[DONE]` ends a stream whose server
        # never says a finish_reason (llama-cpp-python sends null on some last chunks).
        if state.finish_reason is None and not pump.ended:
            raise self._failure(error, state) from error
        yield from state.assembler.finish()
        completion = state.completion()
        completion.model = request["model"]
        completion.price = price_for(completion.model, self._settings.prices)
        yield StreamEnd(completion)

    def _why_empty(self, request: dict[str, Any], cancel: CancelToken) -> ApiError:
        """The error for a 200 with an empty stream: llama-cpp-python answers a streamed request
        over its context window so, its reason only in its log. The same request unstreamed,
        for one token, is refused with the reason, which is what the user is told."""
        import openai

        logger.warning("empty model stream: asking again unstreamed to learn why")
        probe = {key: value for key, value in request.items() if not key.startswith("stream")}
        probe["extra_body"] = {**request["extra_body"], "max_tokens": 1}
        limit = self._settings.request_timeout + 15.0
        # On a connection of its own: llama-cpp-python's server resets the one the empty
        # stream came on (the request failed inside it), and a pooled one would be reused.
        sdk = self._build_sdk()
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

    def _read_chunk(self, data: str, state: _CallState) -> Iterator[StreamItem]:
        if self._on_raw_delta is not None:
            self._on_raw_delta(data)
        try:
            chunk = json.loads(data)
        except ValueError:
            raise MalformedChunk(f"a stream chunk is not JSON: {data[:200]}") from None
        if not isinstance(chunk, dict):
            raise MalformedChunk(f"a stream chunk is not a JSON object: {data[:200]}")
        if chunk.get("error"):
            error = chunk["error"]
            message = str(error.get("message") if isinstance(error, dict) else error)
            too_long = context_too_long(message, error)
            if too_long is not None:
                raise too_long
            raise ValueError(f"the model API reported an error mid-stream: {message}")
        usage = _field(chunk, "usage", dict)
        items: list[StreamItem] = []
        for choice in _field(chunk, "choices", list) or []:
            if not isinstance(choice, dict):
                raise MalformedChunk(f"a choice in a stream chunk is not an object: {data[:200]}")
            usage = usage or _field(choice, "usage", dict)  # Kimi puts usage in the choice
            delta = _field(choice, "delta", dict) or {}
            reasoning = _field(delta, "reasoning_content", str) or _field(delta, "reasoning", str)
            if reasoning:
                state.reasoning.append(reasoning)
                items.append(ReasoningDelta(reasoning))
            content = _field(delta, "content", str)
            if content:
                state.content.append(content)
                items.append(ContentDelta(content))
            fragments = _field(delta, "tool_calls", list) or []
            state.tool_calls_seen = state.tool_calls_seen or bool(fragments)
            legacy = _field(delta, "function_call", dict)
            if legacy and not state.tool_calls_seen:  # the pre-tools API: one call, no id
                fragments = [{"index": 0, "function": legacy}]
            for fragment in fragments:
                if not isinstance(fragment, dict):
                    raise MalformedChunk(f"a tool call fragment is not an object: {data[:200]}")
                items.extend(state.assembler.feed(fragment))
            state.finish_reason = _field(choice, "finish_reason", str) or state.finish_reason
        if usage:
            state.usage = Usage(
                int(usage.get("prompt_tokens") or 0),
                int(usage.get("completion_tokens") or 0),
                cached_prompt_tokens=_cached_tokens(usage),
            )
        if items and not state.received:
            state.received = True
            state.first_delta = time.monotonic()
        yield from items

    def _failure(self, error: Exception | None, state: _CallState) -> Exception:
        mapped = (
            _map_error(error, self.config.base_url)
            if error is not None
            else NetworkError("The model stream ended before it finished.")
        )
        if state.received:
            return StreamInterrupted(f"The model stream broke off: {mapped}", state.completion())
        if isinstance(mapped, RateLimitError | ServerError | NetworkError):
            return _Retry(mapped, _retry_after(error))
        return mapped

    def _pause(
        self, retry: _Retry, attempt: int, cancel: CancelToken, on_wait: OnWait | None
    ) -> None:
        asked = retry.retry_after
        if asked is not None:
            delay = min(asked, RETRY_AFTER_CAP)
        else:
            delay = self._settings.retry_base_delay * 2 ** (attempt - 1)
            delay *= 1 + random.random() / 4
        logger.info(
            "retrying model call in %.2fs: %s",
            delay,
            retry.error,
            extra={
                "fields": {"attempt": attempt, "delay_s": round(delay, 3), "code": retry.error.code}
            },
        )
        if on_wait is not None:
            told = f"; it asked to wait {asked:g} s" if asked is not None and asked > delay else ""
            on_wait(
                delay,
                (
                    f"The model API failed ({retry.error.code}: {retry.error}){told}: trying again "
                    f"in {delay:.0f} s (attempt {attempt + 1} of {self._settings.max_retries + 1})."
                ),
            )
        if cancel.wait(delay):
            raise TaskCancelled()

    def _log(self, request: dict[str, Any], state: _CallState, attempt: int, status: str) -> None:
        now = time.monotonic()
        fields = {
            "provider": self.config.name,
            "model": request["model"],
            "attempt": attempt,
            "status": status,
            "latency_ms": round((now - state.started) * 1000),
            "first_delta_ms": (
                round((state.first_delta - state.started) * 1000) if state.first_delta else None
            ),
            "prompt_tokens": state.usage.prompt_tokens,
            "completion_tokens": state.usage.completion_tokens,
            "finish_reason": state.finish_reason,
        }
        level = logging.INFO if status in ("ok", "cancelled") else logging.WARNING
        logger.log(level, "model call %s", status, extra={"fields": fields})


def _field(data: dict[str, Any], key: str, kind: type) -> Any:
    """`data[key]` when absent, null or of `kind`; a chunk of another shape is refused."""
    value = data.get(key)
    if value is not None and not isinstance(value, kind):
        raise MalformedChunk(
            f"a stream chunk has {key!r} as {type(value).__name__}, not {kind.__name__}"
        )
    return value


def _map_error(error: Exception, base_url: str) -> ApiError:
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


def _cached_tokens(usage: dict[str, Any]) -> int:
    """The prompt tokens the provider read from its cache: DeepSeek's `prompt_cache_hit_tokens`,
    or OpenAI's `prompt_tokens_details.cached_tokens` (Kimi's and DashScope's too)."""
    hit = usage.get("prompt_cache_hit_tokens")
    if isinstance(hit, int):
        return hit
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    return cached if isinstance(cached, int) else 0
