"""The API client: the real openai SDK against the fake model API over HTTP."""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, TypedDict

import pytest

from history.records import ChatMessage, MessageMeta, MessageRecord, ToolCallRecord
from model.api_client import ApiClient
from model.completion import Completion, ContentDelta, ReasoningDelta, StreamEnd, StreamItem
from model.errors import (
    AuthError,
    BadResponse,
    NetworkError,
    RateLimitError,
    RequestRejected,
    ServerError,
    StreamInterrupted,
)
from model.providers import prepare_messages, resolve_provider
from model.tool_calls import ToolCallArgs, ToolCallStarted
from tests.fake_llm import Call, ErrorReply, FakeLLM, RawReply, Reply
from tests.kit import wait_until
from utils.cancel import CancelToken, TaskCancelled
from utils.settings import Settings

KEY_VARS = (
    "AGENT_PROVIDER",
    "AGENT_BASE_URL",
    "AGENT_API_KEY",
    "AGENT_MODEL",
    "AGENT_THINKING_MODEL",
    "AGENT_CONTEXT_WINDOW",
    "AGENT_USE_PROXY",
    "DEEPSEEK_API_KEY",
    "MOONSHOT_API_KEY",
    "DASHSCOPE_API_KEY",
    "SILICONFLOW_API_KEY",
    "OPENAI_API_KEY",
)


class TreeMessage(ChatMessage):
    """A record as far as the client is given one here: a message and its place in the tree."""

    parent_id: str | None


USER: TreeMessage = {"id": "m1", "parent_id": None, "role": "user", "content": "hi", "meta": {}}


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No stray .env, config.yaml or provider variables from the developer's machine."""
    monkeypatch.chdir(tmp_path)
    for name in KEY_VARS:
        monkeypatch.delenv(name, raising=False)


def make_settings(fake: FakeLLM | None = None, **overrides: Any) -> Settings:
    values: dict[str, Any] = {"retry_base_delay": 0.01, "max_retries": 2, "request_timeout": 5}
    if fake is not None:
        values |= {
            "provider": fake.flavour.name,
            "base_url": fake.base_url,
            "api_key": fake.api_key,
        }
    return Settings(**(values | overrides))


def make_client(fake: FakeLLM, **overrides: Any) -> ApiClient:
    settings = make_settings(fake, **overrides)
    return ApiClient(resolve_provider(settings), settings)


def run(
    client: ApiClient,
    messages: Sequence[ChatMessage] | None = None,
    *,
    thinking: bool = False,
    tools: list[dict[str, Any]] | None = None,
    cancel: CancelToken | None = None,
) -> list[StreamItem]:
    return list(
        client.stream(
            messages or [USER], tools or [], thinking=thinking, cancel=cancel or CancelToken()
        )
    )


def completion(items: list[StreamItem]) -> Completion:
    assert isinstance(items[-1], StreamEnd)
    return items[-1].completion


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# --- streaming ------------------------------------------------------------------------------


def test_streams_reasoning_content_and_interleaved_tool_calls(fake_llm: FakeLLM) -> None:
    calls = [
        Call("create_file", {"path": "é.txt", "content": 'a "quoted"\nline'}),
        Call("read_file", {"path": "b.txt"}),
    ]
    fake_llm.script(
        Reply(
            content="Working on it.",
            reasoning="First think.",
            tool_calls=calls,
            chunk_size=4,
            split_seed=11,
            interleave=True,
            usage=(120, 45),
        )
    )
    items = run(make_client(fake_llm), thinking=True)
    kinds = [type(item).__name__ for item in items]
    assert (
        kinds.index("ReasoningDelta") < kinds.index("ContentDelta") < kinds.index("ToolCallStarted")
    )
    assert "".join(i.text for i in items if isinstance(i, ReasoningDelta)) == "First think."
    assert "".join(i.text for i in items if isinstance(i, ContentDelta)) == "Working on it."
    started = [i for i in items if isinstance(i, ToolCallStarted)]
    assert [s.name for s in started] == ["create_file", "read_file"]
    for start, call in zip(started, calls, strict=True):
        args = [i for i in items if isinstance(i, ToolCallArgs) and i.call_id == start.call_id]
        assert "".join(i.delta for i in args) == call.arguments
        assert items.index(start) < items.index(args[0])
    result = completion(items)
    assert result.content == "Working on it." and result.reasoning_content == "First think."
    assert [(c.name, json.loads(c.arguments)) for c in result.tool_calls] == [
        (c.name, c.args) for c in calls
    ]
    assert [c.id for c in result.tool_calls] == [s.call_id for s in started]
    assert (result.usage.prompt_tokens, result.usage.completion_tokens) == (120, 45)
    assert result.finish_reason == "tool_calls"


def test_deltas_are_yielded_as_they_arrive(fake_llm: FakeLLM) -> None:
    fake_llm.script(Reply(content="abcdef", chunk_size=1, delay=0.1))
    started = time.monotonic()
    stream = make_client(fake_llm).stream([USER], [], thinking=False, cancel=CancelToken())
    first = next(item for item in stream if isinstance(item, ContentDelta))
    first_at = time.monotonic() - started
    rest = list(stream)
    assert first.text == "a" and first_at < 0.6
    assert time.monotonic() - started > 0.8 and isinstance(rest[-1], StreamEnd)


def test_raw_chunks_reach_the_debug_hook(fake_llm: FakeLLM) -> None:
    fake_llm.script(Reply(content="hey", reasoning="hm", chunk_size=10))
    raw: list[str] = []
    settings = make_settings(fake_llm)
    run(ApiClient(resolve_provider(settings), settings, on_raw_delta=raw.append), thinking=True)
    parsed = [json.loads(line) for line in raw]
    assert len(parsed) == 4  # role, reasoning, content, finish (with usage)
    assert parsed[1]["choices"][0]["delta"]["reasoning_content"] == "hm"
    assert "usage" in parsed[-1]


def test_the_body_is_read_in_the_consumers_own_thread(fake_llm: FakeLLM) -> None:
    """One thread per stream: a reader thread handing each delta over would cost a thread
    switch per token (bench/pace.py). Only the request and its headers wait in a helper
    thread (so a cancel never waits for them), and it is gone once the body flows."""
    fake_llm.script(Reply(content="abcdef", chunk_size=1, delay=0.2))  # the rest takes 1 s
    ours = {"model-request", "model-stream"}
    stream = make_client(fake_llm).stream([USER], [], thinking=False, cancel=CancelToken())
    next(item for item in stream if isinstance(item, ContentDelta))
    wait_until(  # well before the body's end: a thread as long-lived as the body outlasts it
        lambda: not any(t.name in ours for t in threading.enumerate()),
        0.2,
        "the request thread to end once the body flows",
        every=0.005,
    )
    helpers = [t.name for t in threading.enumerate() if t.name in ours]
    rest = list(stream)
    assert helpers == []
    assert "".join(i.text for i in rest if isinstance(i, ContentDelta)) == "bcdef"


def test_usage_in_openai_extra_chunk_and_kimi_choice() -> None:
    with FakeLLM("openai") as fake:
        fake.script(Reply(content="x", usage=(7, 2)))
        assert completion(run(make_client(fake))).usage.prompt_tokens == 7
        assert fake.requests[-1].body["stream_options"] == {"include_usage": True}
    with FakeLLM("kimi") as fake:
        fake.script(Reply(content="x", usage=(9, 4)))
        assert completion(run(make_client(fake))).usage.completion_tokens == 4


def test_deepseek_thinking_switch_in_the_body(fake_llm: FakeLLM) -> None:
    fake_llm.script(Reply(content="a"), Reply(content="b"))
    client = make_client(fake_llm)
    run(client, thinking=True)
    run(client, thinking=False)
    bodies = [r.body for r in fake_llm.chat_requests]
    assert [b["thinking"] for b in bodies] == [{"type": "enabled"}, {"type": "disabled"}]
    assert {b["model"] for b in bodies} == {"deepseek-v4-flash"}


def test_kimi_thinking_is_switched_by_the_thinking_field() -> None:
    with FakeLLM("kimi") as fake:
        fake.script(Reply(content="a", reasoning="r"), Reply(content="b", reasoning="r"))
        client = make_client(fake)
        thought = completion(run(client, thinking=True))
        fast = completion(run(client, thinking=False))
        bodies = [r.body for r in fake.chat_requests]
        assert {b["model"] for b in bodies} == {"kimi-k2.6"}
        assert [b["thinking"] for b in bodies] == [{"type": "enabled"}, {"type": "disabled"}]
        assert (thought.reasoning_content, fast.reasoning_content) == ("r", "")


def test_thinking_tool_round_trip_satisfies_the_reasoning_rule(fake_llm: FakeLLM) -> None:
    fake_llm.script(
        Reply(reasoning="Need the file.", tool_calls=[Call("read_file", {"path": "a"})]),
        Reply(content="Done."),
    )
    client = make_client(fake_llm)
    first = completion(run(client, thinking=True))
    call = first.tool_calls[0]
    records: list[TreeMessage] = [
        USER,
        {
            "id": "m2",
            "parent_id": "m1",
            "role": "assistant",
            "content": first.content,
            "reasoning_content": first.reasoning_content,
            "tool_calls": [call.to_message()],
            "meta": {},
        },
        {
            "id": "m3",
            "parent_id": "m2",
            "role": "tool",
            "content": "text of a",
            "tool_call_id": call.id,
            "name": "read_file",
            "meta": {},
        },
    ]
    assert completion(run(client, records)).content == "Done."
    sent = fake_llm.chat_requests[-1].body["messages"][1]
    assert sent["reasoning_content"] == "Need the file."
    without: list[TreeMessage] = [records[0], {**records[1], "reasoning_content": ""}, records[2]]
    with pytest.raises(RequestRejected, match="reasoning_content"):
        run(client, without)


# --- errors and retries ---------------------------------------------------------------------


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


@pytest.mark.parametrize(
    ("reply", "says"),
    [
        (RawReply("<html><body>Please log in to the proxy</body></html>"), "text/html page"),
        (RawReply('{"id": "x", "choices": []}', "application/json"), "whole JSON reply"),
        (RawReply('data: {"choices": ["oops"]}\n\n', "text/event-stream"), "not an object"),
        (
            RawReply('data: {"choices": [{"delta": "hi"}]}\n\n', "text/event-stream"),
            "'delta' as str, not dict",
        ),
        (RawReply("data: not json\n\n", "text/event-stream"), "not JSON"),
    ],
)
def test_a_200_that_is_not_a_chat_stream_is_a_clear_error_at_once(
    fake_llm: FakeLLM, reply: RawReply, says: str
) -> None:
    fake_llm.script(reply)
    with pytest.raises(BadResponse, match=says):
        run(make_client(fake_llm))
    assert len(fake_llm.chat_requests) == 1  # not retried: it would answer the same


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


def test_401_is_auth_error_without_retry(fake_llm: FakeLLM) -> None:
    with pytest.raises(AuthError, match="Authentication Fails"):
        run(make_client(fake_llm, api_key="sk-wrong-9999"))
    assert len(fake_llm.chat_requests) == 1


def test_400_is_request_rejected_with_the_api_message(fake_llm: FakeLLM) -> None:
    with pytest.raises(RequestRejected, match="Model Not Exist"):
        run(make_client(fake_llm, model="deepseek-chat"))
    assert len(fake_llm.chat_requests) == 1
    dangling: list[ChatMessage] = [
        USER,
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "x", "arguments": "{}"}}
            ],
        },
    ]
    with pytest.raises(RequestRejected, match="did not have response messages: c1"):
        run(make_client(fake_llm), dangling)


def test_cut_stream_raises_stream_interrupted_with_the_partial(fake_llm: FakeLLM) -> None:
    fake_llm.script(Reply(content="Hello world", chunk_size=1, cut_after=6))
    seen: list[StreamItem] = []
    with pytest.raises(StreamInterrupted) as caught:
        for item in make_client(fake_llm).stream([USER], [], thinking=False, cancel=CancelToken()):
            seen.append(item)
    assert caught.value.partial.content == "Hello"
    assert "".join(i.text for i in seen if isinstance(i, ContentDelta)) == "Hello"
    assert len(fake_llm.chat_requests) == 1  # never retried once deltas arrived


def test_cut_before_any_delta_is_retried(fake_llm: FakeLLM) -> None:
    fake_llm.script(Reply(content="lost", cut_after=1), Reply(content="second try"))
    assert completion(run(make_client(fake_llm))).content == "second try"
    assert len(fake_llm.chat_requests) == 2


def test_missing_key_fails_only_when_streaming() -> None:
    settings = make_settings(provider="deepseek")
    config = resolve_provider(settings)
    assert not config.configured and "DEEPSEEK_API_KEY" in (config.problem or "")
    with pytest.raises(AuthError, match="DEEPSEEK_API_KEY"):
        run(ApiClient(config, settings))


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
    assert elapsed < 1.0 and seen == []


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


# --- transport, logging ---------------------------------------------------------------------


@pytest.fixture
def dead_proxy(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    proxy = f"http://127.0.0.1:{closed_port()}"
    for name in (
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
    ):
        monkeypatch.setenv(name, proxy)
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    yield


@pytest.mark.usefixtures("dead_proxy")
def test_proxy_variables_are_ignored_unless_asked(fake_llm: FakeLLM) -> None:
    fake_llm.script(Reply(content="direct"))
    assert completion(run(make_client(fake_llm))).content == "direct"
    with pytest.raises(NetworkError):
        run(make_client(fake_llm, use_proxy=True, max_retries=0))


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


# --- providers and message preparation ------------------------------------------------------


def test_provider_precedence(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MOONSHOT_API_KEY", "own-key")
    kimi = resolve_provider(make_settings(provider="kimi"))
    assert (kimi.base_url, kimi.model, kimi.thinking_model) == (
        "https://api.moonshot.ai/v1",
        "kimi-k2.6",
        "kimi-k2.6",
    )
    assert kimi.api_key == "own-key" and kimi.key_env == "MOONSHOT_API_KEY"
    monkeypatch.setenv("AGENT_API_KEY", "agent-key")
    monkeypatch.setenv("AGENT_MODEL", "kimi-k2.6")
    monkeypatch.setenv("AGENT_CONTEXT_WINDOW", "5000")
    overridden = resolve_provider(make_settings(provider="kimi"))
    assert (overridden.api_key, overridden.model, overridden.context_window) == (
        "agent-key",
        "kimi-k2.6",
        5000,
    )
    for name in ("AGENT_API_KEY", "AGENT_MODEL", "AGENT_CONTEXT_WINDOW"):
        monkeypatch.delenv(name)
    deepseek = resolve_provider(make_settings(provider="deepseek", api_key="k"))
    assert (deepseek.model, deepseek.thinking_model, deepseek.context_window) == (
        "deepseek-v4-flash",
        "deepseek-v4-flash",
        1_000_000,
    )
    assert deepseek.thinking_body(True) == {"thinking": {"type": "enabled"}}
    qwen = resolve_provider(make_settings(provider="qwen"))
    assert qwen.thinking_body(False) == {"enable_thinking": False}
    assert "DASHSCOPE_API_KEY" in (qwen.problem or "")


def test_custom_provider_needs_a_url_but_no_key() -> None:
    assert "AGENT_BASE_URL" in (resolve_provider(make_settings(provider="custom")).problem or "")
    ollama = resolve_provider(
        make_settings(provider="custom", model="qwen3:8b", base_url="http://localhost:11434/v1/")
    )
    assert ollama.configured and ollama.base_url == "http://localhost:11434/v1"


class _Common(TypedDict):
    conversation_id: str
    depth: int
    version: int
    created_at: str
    meta: MessageMeta


def _records() -> list[MessageRecord]:
    call: ToolCallRecord = {
        "id": "c1",
        "type": "function",
        "function": {"name": "read_file", "arguments": "{}"},
    }
    common: _Common = {
        "conversation_id": "x",
        "depth": 0,
        "version": 1,
        "created_at": "t",
        "meta": {},
    }
    return [
        {**common, "id": "1", "parent_id": None, "role": "system", "content": "sys"},
        {**common, "id": "2", "parent_id": "1", "role": "user", "content": "q"},
        {
            **common,
            "id": "3",
            "parent_id": "2",
            "role": "assistant",
            "content": "",
            "reasoning_content": "why",
            "tool_calls": [call],
        },
        {
            **common,
            "id": "4",
            "parent_id": "3",
            "role": "tool",
            "content": "data",
            "tool_call_id": "c1",
            "name": "read_file",
        },
        {
            **common,
            "id": "5",
            "parent_id": "4",
            "role": "assistant",
            "content": "answer",
            "reasoning_content": "final thoughts",
        },
        {
            **common,
            "id": "6",
            "parent_id": "5",
            "role": "assistant",
            "content": "",
            "tool_calls": [{**call, "id": "c2"}],
        },
        {
            **common,
            "id": "7",
            "parent_id": "6",
            "role": "tool",
            "content": "more",
            "tool_call_id": "c2",
            "name": "read_file",
        },
    ]


def test_prepare_messages_for_deepseek() -> None:
    config = resolve_provider(make_settings(provider="deepseek", api_key="k"))
    messages = prepare_messages(_records(), config)
    assert messages[0] == {"role": "system", "content": "sys"}
    assert messages[2]["reasoning_content"] == "why"
    assert messages[2]["tool_calls"][0]["function"]["arguments"] == "{}"
    assert messages[3] == {"role": "tool", "content": "data", "tool_call_id": "c1"}
    assert messages[4] == {"role": "assistant", "content": "answer"}  # final reasoning not resent
    assert messages[5]["reasoning_content"] == ""  # DeepSeek wants the field on every call turn


def test_prepare_messages_for_kimi_and_openai() -> None:
    kimi = prepare_messages(_records(), resolve_provider(make_settings(provider="kimi")))
    assert kimi[3]["name"] == "read_file"
    assert kimi[2]["reasoning_content"] == "why" and kimi[5]["reasoning_content"] == ""
    openai_messages = prepare_messages(
        _records(), resolve_provider(make_settings(provider="openai"))
    )
    assert "name" not in openai_messages[3] and "reasoning_content" not in openai_messages[5]
    assert all(
        set(m) <= {"role", "content", "tool_calls", "tool_call_id", "reasoning_content"}
        for m in openai_messages
    )
