"""The fake model API: its wire format, scripting, and strict request validation."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.fake_llm import Call, ErrorReply, FakeLLM, RecordedRequest, Reply

ROOT = Path(__file__).resolve().parent.parent
USER = {"role": "user", "content": "hi"}


def post(
    fake: FakeLLM, body: dict[str, Any], *, key: str | None = "default", timeout: float = 10
) -> requests.Response:
    key = fake.api_key if key == "default" else key
    headers = {} if key is None else {"Authorization": f"Bearer {key}"}
    return requests.post(
        f"{fake.base_url}/chat/completions", json=body, headers=headers, timeout=timeout
    )


def chat(fake: FakeLLM, messages: list[dict[str, Any]] | None = None, **extra: Any) -> dict:
    return {"model": fake.model, "messages": messages or [USER], **extra}


def frames(response: requests.Response) -> list[str]:
    """The SSE frames exactly as sent (each ended by a blank line)."""
    text = response.content.decode()
    assert text.endswith("\n\n")
    return text[:-2].split("\n\n")


def chunks(response: requests.Response) -> list[dict[str, Any]]:
    return [
        json.loads(f.removeprefix("data: ")) for f in frames(response) if f.startswith("data: {")
    ]


def deltas(response: requests.Response) -> list[dict[str, Any]]:
    return [c["choices"][0]["delta"] for c in chunks(response) if c["choices"]]


def joined(response: requests.Response, key: str) -> str:
    return "".join(d.get(key) or "" for d in deltas(response))


def tool_fragments(response: requests.Response) -> list[dict[str, Any]]:
    return [f for d in deltas(response) for f in d.get("tool_calls") or []]


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


@pytest.mark.parametrize("key", [None, "sk-wrong-key-1234"])
def test_wrong_or_missing_key_is_401(fake_llm: FakeLLM, key: str | None) -> None:
    fake_llm.script(Reply(content="never"))
    response = post(fake_llm, chat(fake_llm), key=key)
    assert response.status_code == 401
    error = response.json()["error"]
    assert error["type"] == "authentication_error" and error["message"]
    assert fake_llm.pending == 1


def test_unknown_model_is_refused_like_the_real_api(fake_llm: FakeLLM) -> None:
    response = post(fake_llm, chat(fake_llm, model="deepseek-chat"))
    assert response.status_code == 400
    assert response.json()["error"]["message"] == "Model Not Exist"
    with FakeLLM("openai") as fake:
        assert post(fake, chat(fake, model="gpt-0")).json()["error"]["code"] == "model_not_found"


def test_error_reply_status_header_and_body(fake_llm: FakeLLM) -> None:
    fake_llm.script(ErrorReply(429, "Rate limit reached", retry_after=2), ErrorReply(503))
    limited = post(fake_llm, chat(fake_llm, stream=True))
    assert limited.status_code == 429 and limited.headers["retry-after"] == "2"
    assert limited.json() == {
        "error": {
            "message": "Rate limit reached",
            "type": "rate_limit_error",
            "param": None,
            "code": None,
        }
    }
    assert post(fake_llm, chat(fake_llm)).status_code == 503


def test_cut_after_closes_the_connection_without_done(fake_llm: FakeLLM) -> None:
    fake_llm.script(Reply(content="abcdefgh", chunk_size=1, cut_after=3))
    response = requests.post(
        f"{fake_llm.base_url}/chat/completions",
        stream=True,
        timeout=5,
        json=chat(fake_llm, stream=True),
        headers={"Authorization": f"Bearer {fake_llm.api_key}"},
    )
    received = b""
    with pytest.raises(requests.exceptions.ChunkedEncodingError):
        for part in response.iter_content(chunk_size=None):
            received += part
    text = received.decode()
    assert text.count("data: {") == 3 and "[DONE]" not in text


def test_delay_paces_the_chunks(fake_llm: FakeLLM) -> None:
    fake_llm.script(Reply(content="abc", chunk_size=1, delay=0.05))
    started = time.monotonic()
    post(fake_llm, chat(fake_llm, stream=True))
    assert time.monotonic() - started >= 0.05 * 6  # keep-alive, role, 3 pieces, final, [DONE]


def test_empty_script_is_a_clear_500_not_a_hang(fake_llm: FakeLLM) -> None:
    response = post(fake_llm, chat(fake_llm, stream=True), timeout=5)
    assert response.status_code == 500
    assert "test bug" in response.json()["error"]["message"]


def test_script_first_then_responder(fake_llm: FakeLLM) -> None:
    seen: list[RecordedRequest] = []

    def responder(request: RecordedRequest) -> Reply:
        seen.append(request)
        return Reply(content=f"dynamic {request.last_user_text}")

    fake_llm.responder = responder
    fake_llm.script(Reply(content="scripted"))
    assert post(fake_llm, chat(fake_llm)).json()["choices"][0]["message"]["content"] == "scripted"
    second = post(fake_llm, chat(fake_llm)).json()
    assert second["choices"][0]["message"]["content"] == "dynamic hi"
    assert len(seen) == 1


def test_requests_are_recorded_with_body_headers_and_status(fake_llm: FakeLLM) -> None:
    fake_llm.script(Reply(content="x"))
    post(fake_llm, chat(fake_llm, stream=True, thinking={"type": "enabled"}))
    post(fake_llm, {"model": fake_llm.model, "messages": []})
    first, second = fake_llm.chat_requests
    assert first.body["thinking"] == {"type": "enabled"}
    assert first.headers["authorization"] == f"Bearer {fake_llm.api_key}"
    assert (first.status, second.status) == (200, 400)


def test_fifty_concurrent_streams(fake_llm: FakeLLM) -> None:
    fake_llm.responder = lambda request: Reply(
        content=f"echo {request.last_user_text}", chunk_size=2, delay=0.01
    )

    def one(number: int) -> str:
        body = chat(fake_llm, [{"role": "user", "content": f"n{number}"}], stream=True)
        return joined(post(fake_llm, body, timeout=20), "content")

    started = time.monotonic()
    with ThreadPoolExecutor(50) as pool:
        answers = list(pool.map(one, range(50)))
    assert answers == [f"echo n{n}" for n in range(50)]
    assert time.monotonic() - started < 5


def test_runs_as_a_standalone_process(tmp_path: Path) -> None:
    with FakeLLM() as probe:  # borrow a free port, then release it
        port = int(probe.base_url.split(":")[2].split("/")[0])
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.fake_llm", "--port", str(port)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert "fake LLM" in (process.stdout.readline() if process.stdout else "")
        fake = FakeLLM(port=port)
        answer = post(fake, chat(fake, [{"role": "user", "content": "ping"}], stream=True))
        assert joined(answer, "content") == "Echo: ping"
    finally:
        process.terminate()
        process.wait(timeout=10)


# --- validation -----------------------------------------------------------------------------


def call(call_id: str, name: str = "read_file", arguments: object = '{"path": "a"}') -> dict:
    """A call as sent on the wire; `arguments` is any JSON value (text on a valid one)."""
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def assistant(*calls: dict, **extra: Any) -> dict:
    return {"role": "assistant", "content": "", "tool_calls": list(calls), **extra}


def tool(call_id: str, content: str = "ok") -> dict:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


TOOL = {
    "type": "function",
    "function": {
        "name": "read_file",
        "description": "Read.",
        "parameters": {"type": "object", "properties": {}},
    },
}

VALID = {
    "one user message": [USER],
    "system first": [{"role": "system", "content": "be brief"}, USER],
    "answered calls in any order": [
        USER,
        assistant(call("a"), call("b")),
        tool("b"),
        tool("a"),
        {"role": "assistant", "content": "done"},
        USER,
    ],
    "null content with tool calls": [
        USER,
        {"role": "assistant", "content": None, "tool_calls": [call("a")]},
        tool("a"),
    ],
    "content parts": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
}

INVALID = {
    "no messages": ([], "non-empty"),
    "unknown role": ([{"role": "bot", "content": "x"}], "Supported values"),
    "tool without a call": ([USER, tool("a")], "preceding message with 'tool_calls'"),
    "tool answering an unknown id": ([USER, assistant(call("a")), tool("zzz")], "zzz"),
    "tool after a user message": (
        [USER, assistant(call("a")), USER, tool("a")],
        "did not have response messages: a",
    ),
    "unanswered call before the next turn": (
        [USER, assistant(call("a"), call("b")), tool("a"), USER],
        "did not have response messages: b",
    ),
    "unanswered call at the end": ([USER, assistant(call("a"))], "did not have response"),
    "duplicate tool call ids": (
        [USER, assistant(call("a")), tool("a"), assistant(call("a")), tool("a")],
        "Duplicate tool_call id",
    ),
    "call without id": (
        [USER, assistant({"type": "function", "function": {"name": "x", "arguments": "{}"}})],
        ".id",
    ),
    "call of the wrong type": ([USER, assistant({**call("a"), "type": "code"})], ".type"),
    "call without a name": (
        [USER, assistant({"id": "a", "type": "function", "function": {"arguments": "{}"}})],
        "name",
    ),
    "arguments as an object": (
        [
            USER,
            assistant(call("a", arguments={"path": "a"})),
            tool("a"),
        ],
        "arguments",
    ),
    "user without content": ([{"role": "user"}], "content"),
    "tool without tool_call_id": (
        [USER, assistant(call("a")), {"role": "tool", "content": "x"}],
        "tool_call_id",
    ),
}


@pytest.mark.parametrize("messages", VALID.values(), ids=VALID.keys())
def test_valid_requests_pass(fake_llm: FakeLLM, messages: list[dict]) -> None:
    fake_llm.script(Reply(content="fine"))
    response = post(fake_llm, chat(fake_llm, messages, tools=[TOOL], stream=True))
    assert response.status_code == 200, response.text


@pytest.mark.parametrize(("messages", "expected"), INVALID.values(), ids=INVALID.keys())
def test_invalid_messages_are_400(fake_llm: FakeLLM, messages: list[dict], expected: str) -> None:
    fake_llm.script(Reply(content="never"))
    response = post(fake_llm, {"model": fake_llm.model, "messages": messages, "stream": True})
    assert response.status_code == 400
    error = response.json()["error"]
    assert expected in error["message"] and error["type"] == "invalid_request_error"
    assert fake_llm.pending == 1  # a refused request consumes nothing


BAD_TOOLS = {
    "not a function": [{"type": "retrieval", "function": {"name": "x"}}],
    "name with a space": [{"type": "function", "function": {"name": "read file"}}],
    "name too long": [{"type": "function", "function": {"name": "x" * 65}}],
    "parameters not an object": [
        {"type": "function", "function": {"name": "x", "parameters": {"type": "array"}}}
    ],
    "duplicate names": [TOOL, TOOL],
}


@pytest.mark.parametrize("tools", BAD_TOOLS.values(), ids=BAD_TOOLS.keys())
def test_malformed_tools_are_400(fake_llm: FakeLLM, tools: list[dict]) -> None:
    assert post(fake_llm, chat(fake_llm, tools=tools)).status_code == 400


def test_unparsable_body_is_400(fake_llm: FakeLLM) -> None:
    response = requests.post(
        f"{fake_llm.base_url}/chat/completions",
        data=b'{"model": "deepseek-v4-flash", "messages": [',
        headers={"Authorization": f"Bearer {fake_llm.api_key}"},
        timeout=5,
    )
    assert response.status_code == 400 and "parse" in response.json()["error"]["message"]
    assert fake_llm.requests[-1].status == 400


def test_other_request_rules(fake_llm: FakeLLM) -> None:
    assert post(fake_llm, chat(fake_llm, stream_options={"include_usage": True})).status_code == 400
    assert post(fake_llm, chat(fake_llm, thinking={"type": "maybe"})).status_code == 400
    with FakeLLM("openai") as fake:
        response = post(fake, chat(fake, enable_thinking=True))
        assert response.status_code == 400 and "enable_thinking" in response.text


def _thinking_round(fake: FakeLLM, **extra: Any) -> tuple[dict, str]:
    """One answer with reasoning and a tool call; returns (assistant message, reasoning)."""
    fake.script(Reply(reasoning="I should read a.", tool_calls=[Call("read_file", {"path": "a"})]))
    response = post(fake, chat(fake, stream=True, **extra))
    head = tool_fragments(response)[0]
    arguments = "".join(f["function"]["arguments"] for f in tool_fragments(response))
    message = assistant(call(head["id"], "read_file", arguments))
    return message, joined(response, "reasoning_content")


@pytest.mark.parametrize("flavour", ["deepseek", "kimi"])
def test_thinking_tool_call_must_come_back_with_its_reasoning(flavour: str) -> None:
    with FakeLLM(flavour) as fake:
        model = fake.model
        message, reasoning = _thinking_round(fake, model=model)
        assert reasoning == "I should read a."
        history = [USER, message, tool(message["tool_calls"][0]["id"])]
        refused = post(fake, chat(fake, history, model=model))
        assert refused.status_code == 400
        assert "reasoning_content" in refused.json()["error"]["message"]
        assert "index 1" in refused.json()["error"]["message"]
        empty = [USER, {**message, "reasoning_content": ""}, history[2]]
        assert post(fake, chat(fake, empty, model=model)).status_code == 400
        fake.script(Reply(content="done"))
        kept = [USER, {**message, "reasoning_content": reasoning}, history[2]]
        assert post(fake, chat(fake, kept, model=model)).status_code == 200


def test_tool_calls_made_without_thinking_need_no_reasoning(fake_llm: FakeLLM) -> None:
    message, reasoning = _thinking_round(fake_llm, thinking={"type": "disabled"})
    assert reasoning == ""
    fake_llm.script(Reply(content="done"))
    history = [USER, message, tool(message["tool_calls"][0]["id"])]
    assert post(fake_llm, chat(fake_llm, history)).status_code == 200
