"""The fake model API's wire format: each flavour's stream, tool-call fragments and usage."""

from __future__ import annotations

import re
from typing import Any

import requests

from tests.fake_llm import Call, FakeLLM, Reply
from tests.kit.fake_llm_http import USER, chat, chunks, deltas, frames, joined, post, tool_fragments

# --- wire format ----------------------------------------------------------------------------


def test_deepseek_stream_is_exact_sse(fake_llm: FakeLLM) -> None:
    fake_llm.script(Reply(content="Hello, wörld!", chunk_size=4))
    response = post(fake_llm, chat(fake_llm, stream=True))
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    all_frames = frames(response)
    assert all_frames[0] == ": keep-alive"
    assert all_frames[-1] == "data: [DONE]"
    assert all(f.startswith("data: ") for f in all_frames[1:])
    body = chunks(response)
    assert {c["id"] for c in body} == {body[0]["id"]}
    for chunk in body:
        assert chunk["object"] == "chat.completion.chunk"
        assert chunk["model"] == "deepseek-v4-flash"
        assert isinstance(chunk["created"], int)
        choice = chunk["choices"][0]
        assert set(choice) >= {"index", "delta", "finish_reason", "logprobs"}
    assert body[0]["choices"][0]["delta"]["role"] == "assistant"
    assert [d["content"] for d in deltas(response)[1:-1]] == ["Hell", "o, w", "örld", "!"]
    assert body[-1]["choices"][0]["finish_reason"] == "stop"
    assert all(c["choices"][0]["finish_reason"] is None for c in body[:-1])
    usage = body[-1]["usage"]
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]


def test_deepseek_reasoning_follows_the_thinking_switch(fake_llm: FakeLLM) -> None:
    fake_llm.script(
        Reply(content="answer", reasoning="let me think"),
        Reply(content="answer", reasoning="let me think"),
    )
    enabled = post(fake_llm, chat(fake_llm, stream=True, thinking={"type": "enabled"}))
    assert joined(enabled, "reasoning_content") == "let me think"
    assert joined(enabled, "content") == "answer"
    assert enabled.text.index('reasoning_content":"let') < enabled.text.index('"answer')
    disabled = post(fake_llm, chat(fake_llm, stream=True, thinking={"type": "disabled"}))
    assert joined(disabled, "reasoning_content") == ""
    assert joined(disabled, "content") == "answer"


def test_tool_call_fragments_have_the_provider_shape(fake_llm: FakeLLM) -> None:
    calls = [
        Call("create_file", {"path": "a.txt", "content": 'x "y"\n'}),
        Call("read_file", {"path": "b.txt"}),
    ]
    fake_llm.script(Reply(tool_calls=calls, chunk_size=3, interleave=True, split_seed=7))
    response = post(fake_llm, chat(fake_llm, stream=True))
    fragments = tool_fragments(response)
    heads = [f for f in fragments if "id" in f]
    assert [h["function"]["name"] for h in heads] == ["create_file", "read_file"]
    for number, fragment in enumerate(heads):
        assert fragment["index"] == number and fragment["type"] == "function"
        assert re.fullmatch(rf"call_0{number}_[A-Za-z0-9]{{24}}", fragment["id"])
    for fragment in fragments:
        if "id" not in fragment:
            assert set(fragment) == {"index", "function"}
            assert set(fragment["function"]) == {"arguments"}
    assert [f["index"] for f in fragments] != sorted(f["index"] for f in fragments)  # interleaved
    for index, call in enumerate(calls):
        text = "".join(f["function"]["arguments"] for f in fragments if f["index"] == index)
        assert text == call.arguments
    assert chunks(response)[-1]["choices"][0]["finish_reason"] == "tool_calls"


def test_raw_and_pieced_arguments_are_sent_verbatim(fake_llm: FakeLLM) -> None:
    raw = '{"path": "a.txt", "content": "no end'
    fake_llm.script(
        Reply(
            tool_calls=[
                Call("create_file", raw=raw),
                Call("read_file", pieces=['{"pa', 'th": "\\', 'u00e9"}']),
            ]
        )
    )
    fragments = tool_fragments(post(fake_llm, chat(fake_llm, stream=True)))
    first = "".join(f["function"]["arguments"] for f in fragments if f["index"] == 0)
    assert first == raw
    second = [f["function"]["arguments"] for f in fragments if f["index"] == 1]
    assert second == ["", '{"pa', 'th": "\\', 'u00e9"}']


def test_kimi_ids_usage_in_choice_and_thinking_switch() -> None:
    with FakeLLM("kimi") as fake:
        fake.script(
            Reply(reasoning="hmm", tool_calls=[Call("read_file", {"path": "a"})]),
            Reply(content="plain", reasoning="dropped"),
        )
        thinking = post(fake, chat(fake, stream=True, model="kimi-k2.6"))
        assert joined(thinking, "reasoning_content") == "hmm"
        assert tool_fragments(thinking)[0]["id"] == "functions.read_file:0"
        final = chunks(thinking)[-1]
        assert "usage" not in final and final["choices"][0]["usage"]["prompt_tokens"] > 0
        fast = post(fake, chat(fake, stream=True, model="kimi-k2.6", thinking={"type": "disabled"}))
        assert joined(fast, "reasoning_content") == "" and joined(fast, "content") == "plain"


def test_kimi_ids_count_earlier_calls_of_the_conversation() -> None:
    with FakeLLM("kimi") as fake:
        fake.script(Reply(tool_calls=[Call("list_files", {})]))
        earlier = {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "functions.read_file:0",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": "{}"},
                }
            ],
        }
        messages: list[dict[str, Any]] = [
            USER,
            earlier,
            {"role": "tool", "tool_call_id": "functions.read_file:0", "content": "ok"},
        ]
        response = post(fake, chat(fake, messages, stream=True))
        assert tool_fragments(response)[0]["id"] == "functions.list_files:1"


def test_openai_usage_chunk_only_when_asked() -> None:
    with FakeLLM("openai") as fake:
        fake.script(Reply(content="hi", usage=(11, 3)), Reply(content="hi"))
        asked = chunks(post(fake, chat(fake, stream=True, stream_options={"include_usage": True})))
        assert asked[-1]["choices"] == []
        assert asked[-1]["usage"] == {
            "prompt_tokens": 11,
            "completion_tokens": 3,
            "total_tokens": 14,
        }
        assert all(c["usage"] is None for c in asked[:-1])
        plain = chunks(post(fake, chat(fake, stream=True)))
        assert all("usage" not in c for c in plain)


def test_non_streaming_completion(fake_llm: FakeLLM) -> None:
    fake_llm.script(Reply(content="", reasoning="r", tool_calls=[Call("list_files", {})]))
    body = post(fake_llm, chat(fake_llm)).json()
    assert body["object"] == "chat.completion"
    message = body["choices"][0]["message"]
    assert message["content"] is None and message["reasoning_content"] == "r"
    assert message["tool_calls"][0]["function"] == {"name": "list_files", "arguments": "{}"}
    assert body["choices"][0]["finish_reason"] == "tool_calls"


def test_models_endpoint(fake_llm: FakeLLM) -> None:
    response = requests.get(
        f"{fake_llm.base_url}/models",
        timeout=5,
        headers={"Authorization": f"Bearer {fake_llm.api_key}"},
    )
    assert [m["id"] for m in response.json()["data"]] == ["deepseek-v4-flash", "deepseek-v4-pro"]
