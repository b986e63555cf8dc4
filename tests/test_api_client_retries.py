"""The API client's retries (rate limits, server errors, refused connections) and its cancel."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from model.api_client import ApiClient
from model.completion import CallStarted, ContentDelta, StreamItem
from model.errors import NetworkError, RateLimitError, ServerError
from model.providers import resolve_provider
from tests.fake_llm import ErrorReply, FakeLLM, Reply
from tests.kit.model import USER, closed_port, completion, make_client, run
from tests.kit.settings import make_settings
from utils.cancel import CancelToken, TaskCancelled

pytestmark = pytest.mark.usefixtures("clean_environment")


# --- retries --------------------------------------------------------------------------------


def test_429_is_retried_after_retry_after(fake_llm: FakeLLM) -> None:
    fake_llm.script(ErrorReply(429, "Rate limit reached", retry_after=0.4), Reply(content="ok"))
    started = time.monotonic()
    assert completion(run(make_client(fake_llm))).content == "ok"
    assert time.monotonic() - started >= 0.4
    assert len(fake_llm.chat_requests) == 2


def test_server_errors_are_retried(fake_llm: FakeLLM) -> None:
    fake_llm.script(ErrorReply(500), ErrorReply(503, "Service Unavailable"), Reply(content="ok"))
    assert completion(run(make_client(fake_llm))).content == "ok"
    assert [r.status for r in fake_llm.chat_requests] == [500, 503, 200]


def test_retries_give_up_after_max_retries(fake_llm: FakeLLM) -> None:
    fake_llm.script(*[ErrorReply(503, "overloaded")] * 3)
    with pytest.raises(ServerError, match="overloaded"):
        run(make_client(fake_llm, max_retries=2))
    assert len(fake_llm.chat_requests) == 3
    fake_llm.script(*[ErrorReply(429, retry_after=0)] * 2)
    with pytest.raises(RateLimitError):
        run(make_client(fake_llm, max_retries=1))


def test_refused_connection_is_retried_then_network_error() -> None:
    settings = make_settings(
        base_url=f"http://127.0.0.1:{closed_port()}/v1", api_key="k", max_retries=2
    )
    started = time.monotonic()
    with pytest.raises(NetworkError, match=r"127\.0\.0\.1"):
        run(ApiClient(resolve_provider(settings), settings))
    assert time.monotonic() - started >= 0.01 + 0.02  # two backoff pauses happened


def test_a_long_retry_after_is_told_and_capped(fake_llm: FakeLLM) -> None:
    fake_llm.script(ErrorReply(429, "Rate limit reached", retry_after=3600))
    told: list[tuple[float, str]] = []
    token = CancelToken()

    def on_wait(seconds: float, message: str) -> None:
        told.append((seconds, message))
        token.cancel()  # the test need not sit out the wait

    with pytest.raises(TaskCancelled):
        list(
            make_client(fake_llm).stream([USER], [], thinking=False, cancel=token, on_wait=on_wait)
        )
    [(seconds, message)] = told
    assert seconds == 60
    assert "asked to wait 3600 s" in message and "trying again in 60 s" in message
    assert "rate_limited" in message and "attempt 2 of" in message


def test_cut_before_any_delta_is_retried(fake_llm: FakeLLM) -> None:
    fake_llm.script(Reply(content="lost", cut_after=1), Reply(content="second try"))
    assert completion(run(make_client(fake_llm))).content == "second try"
    assert len(fake_llm.chat_requests) == 2


# --- cancel ---------------------------------------------------------------------------------


def cancel_soon(after: float) -> CancelToken:
    token = CancelToken()
    timer = threading.Timer(after, token.cancel)
    timer.daemon = True
    timer.start()
    return token


def _elapsed_until_cancelled(client: ApiClient, token: CancelToken) -> tuple[float, list]:
    seen: list[StreamItem] = []
    started = time.monotonic()
    with pytest.raises(TaskCancelled):
        for item in client.stream([USER], [], thinking=False, cancel=token):
            seen.append(item)
    return time.monotonic() - started, seen


def test_cancel_mid_stream_returns_at_once(fake_llm: FakeLLM) -> None:
    fake_llm.script(Reply(content="abcdef", chunk_size=1, stall_after=4, stall=20))
    elapsed, seen = _elapsed_until_cancelled(make_client(fake_llm), cancel_soon(0.3))
    assert elapsed < 1.0
    assert [i.text for i in seen if isinstance(i, ContentDelta)] == ["a", "b", "c"]  # + role


def test_cancel_before_the_response_starts(fake_llm: FakeLLM) -> None:
    fake_llm.script(Reply(content="late", latency=20))
    elapsed, seen = _elapsed_until_cancelled(make_client(fake_llm), cancel_soon(0.2))
    assert elapsed < 1.0 and [type(item) for item in seen] == [CallStarted]  # no delta


def test_cancel_during_retry_backoff(fake_llm: FakeLLM) -> None:
    fake_llm.script(ErrorReply(429, retry_after=30))
    elapsed, _ = _elapsed_until_cancelled(make_client(fake_llm), cancel_soon(0.2))
    assert elapsed < 1.0


def test_client_still_works_after_a_cancel(fake_llm: FakeLLM) -> None:
    client = make_client(fake_llm)
    fake_llm.script(
        Reply(content="abc", chunk_size=1, stall_after=3, stall=20), Reply(content="fine")
    )
    _elapsed_until_cancelled(client, cancel_soon(0.2))
    assert completion(run(client)).content == "fine"


# --- logging --------------------------------------------------------------------------------


def test_one_log_record_per_model_call(fake_llm: FakeLLM, caplog: pytest.LogCaptureFixture) -> None:
    fake_llm.script(ErrorReply(500), Reply(content="ok", usage=(30, 5)))
    with caplog.at_level(logging.INFO, logger="model.api_client"):
        run(make_client(fake_llm))
    # `fields` is set through extra=, so no attribute LogRecord's type names
    calls = [vars(r)["fields"] for r in caplog.records if r.getMessage().startswith("model call")]
    assert [(f["attempt"], f["status"]) for f in calls] == [(1, "server_error"), (2, "ok")]
    assert calls[1]["provider"] == "deepseek" and calls[1]["model"] == "deepseek-v4-flash"
    assert (calls[1]["prompt_tokens"], calls[1]["completion_tokens"]) == (30, 5)
    assert isinstance(calls[1]["latency_ms"], int)
