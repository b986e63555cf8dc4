"""The API client's streams from the fake model API over HTTP, and the errors it never retries."""

from __future__ import annotations

import json
import threading
import time

import pytest

from model.api_client import ApiClient
from model.completion import ContentDelta, ReasoningDelta, StreamEnd, StreamItem
from model.errors import AuthError, BadResponse, RequestRejected, StreamInterrupted
from model.messages import ChatMessage
from model.providers import resolve_provider
from model.tool_calls import ToolCallArgs, ToolCallStarted
from tests.fake_llm import Call, FakeLLM, RawReply, Reply
from tests.kit.model import USER, TreeMessage, completion, make_client, run
from tests.kit.settings import make_settings
from tests.kit.waits import wait_until
from utils.cancel import CancelToken

pytestmark = pytest.mark.usefixtures("clean_environment")


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


# --- errors that are not retried ------------------------------------------------------------


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


def test_missing_key_fails_only_when_streaming() -> None:
    settings = make_settings(provider="deepseek")
    config = resolve_provider(settings)
    assert not config.configured and "DEEPSEEK_API_KEY" in (config.problem or "")
    with pytest.raises(AuthError, match="DEEPSEEK_API_KEY"):
        run(ApiClient(config, settings))
