"""The fake model API's strict request validation: messages, tool calls, tools, reasoning."""

from __future__ import annotations

from typing import Any

import pytest
import requests

from tests.fake_llm import Call, FakeLLM, Reply
from tests.kit.fake_llm_http import USER, chat, joined, post, tool_fragments


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


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ({"tool_choice": "auto"}, "only allowed when 'tools'"),
        ({"tools": [TOOL], "tool_choice": "always"}, "expected 'none', 'auto'"),
        (
            {"tools": [TOOL], "tool_choice": {"type": "function", "function": {"name": "nope"}}},
            "function 'nope' is not among the tools",
        ),
    ],
)
def test_a_tool_choice_the_api_would_refuse_is_a_400(extra: dict, expected: str) -> None:
    with FakeLLM("openai") as fake:
        response = post(fake, chat(fake, **extra))
    assert response.status_code == 400
    assert expected in response.json()["error"]["message"]
    assert response.json()["error"]["param"] == "tool_choice"
