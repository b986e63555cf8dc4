"""OpenAI-compatible streaming client: the request in the provider's shape, its attempts and
retries, cancellation. A chunk's reading is model/stream_reading.py's, what a failure is told
as model/call_failures.py's."""

from __future__ import annotations

import contextlib
import logging
import random
import threading
import time
from collections.abc import Callable, Generator, Sequence
from typing import TYPE_CHECKING, Any, Unpack

from model.call_failures import Retry, failure, why_empty
from model.completion import CallOptions, CallStarted, OnWait, StreamEnd, StreamItem
from model.errors import ApiError, AuthError
from model.messages import ChatMessage
from model.prices import price_for
from model.providers import PreparedMessages, ProviderConfig
from model.sdk_warmup import SdkWarmup
from model.sse_pump import ChunkPump
from model.stream_reading import CallState, read_chunk
from utils.cancel import CancelToken, TaskCancelled
from utils.settings import Settings

if TYPE_CHECKING:
    import openai

logger = logging.getLogger(__name__)

RETRY_AFTER_CAP = 60.0  # a longer Retry-After is told to the user, and waited only this long


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
        self._warmup = SdkWarmup(trust_env=settings.use_proxy) if config.configured else None
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
            verify=self._warmup.tls_context() if self._warmup is not None else True,
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
        **options: Unpack[CallOptions],
    ) -> Generator[StreamItem, None, None]:
        """Stream one model call: every delta as it arrives, then StreamEnd(Completion).

        Before a retry, `on_wait(seconds, message)` says what failed and how long it waits.
        """
        if not self.config.configured:
            raise AuthError(self.config.problem or "The model provider is not configured.")
        cancel, on_wait = options["cancel"], options.get("on_wait")
        request = self._request(messages, tools, options["thinking"], options.get("require"))
        yield CallStarted(request["model"], price_for(request["model"], self._settings.prices))
        attempt = 0
        while True:
            attempt += 1
            state = CallState()
            try:
                for item in self._attempt(request, cancel, state):
                    if isinstance(item, StreamEnd):
                        self._log(request, state, attempt, "ok")
                    yield item
            except Retry as retry:
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
        self, request: dict[str, Any], cancel: CancelToken, state: CallState
    ) -> Generator[StreamItem, None, None]:
        cancel.raise_if_cancelled()
        sdk = self._client()
        import httpx2
        import openai

        pump = ChunkPump(lambda: sdk.chat.completions.with_streaming_response.create(**request))
        unregister = cancel.on_cancel(pump.close)
        error: Exception | None = None
        try:
            for data in pump:
                if self._on_raw_delta is not None:
                    self._on_raw_delta(data)
                yield from read_chunk(data, state)
        except (openai.APIError, httpx2.HTTPError, ValueError) as err:  # ValueError: bad chunk
            error = err
        finally:
            unregister()
            pump.close()
        cancel.raise_if_cancelled()
        if error is None and not pump.payloads:
            limit = self._settings.request_timeout + 15.0
            raise why_empty(request, self._build_sdk, cancel, limit)
        # A break after the finish is only missing usage; `[DONE]` ends a stream whose server
        # never says a finish_reason (llama-cpp-python sends null on some last chunks).
        if state.finish_reason is None and not pump.ended:
            raise failure(error, state, self.config.base_url) from error
        yield from state.assembler.finish()
        completion = state.completion()
        completion.model = request["model"]
        completion.price = price_for(completion.model, self._settings.prices)
        yield StreamEnd(completion)

    def _pause(
        self, retry: Retry, attempt: int, cancel: CancelToken, on_wait: OnWait | None
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

    def _log(self, request: dict[str, Any], state: CallState, attempt: int, status: str) -> None:
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
