"""Providers: what each resolves to, the proxy variables, and the messages each is sent."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TypedDict

import pytest

from model.errors import NetworkError
from model.providers import PreparedMessages, prepare_messages, resolve_provider
from protocol.records import MessageMeta, MessageRecord, ToolCallRecord
from tests.fake_llm import FakeLLM, Reply
from tests.kit.model import closed_port, completion, make_client, run
from tests.kit.settings import make_settings

pytestmark = pytest.mark.usefixtures("clean_environment")


# --- transport ------------------------------------------------------------------------------


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


# --- providers and message preparation ------------------------------------------------------


def test_provider_precedence() -> None:
    kimi = resolve_provider(make_settings(provider="kimi", moonshot_api_key="own-key"))
    assert (kimi.base_url, kimi.model, kimi.thinking_model) == (
        "https://api.moonshot.ai/v1",
        "kimi-k2.6",
        "kimi-k2.6",
    )
    assert kimi.api_key == "own-key" and kimi.key_env == "MOONSHOT_API_KEY"
    overridden = resolve_provider(
        make_settings(
            provider="kimi",
            moonshot_api_key="own-key",
            api_key="agent-key",
            model="kimi-k2.6",
            context_window=5000,
        )
    )
    assert (overridden.api_key, overridden.model, overridden.context_window) == (
        "agent-key",
        "kimi-k2.6",
        5000,
    )
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


def test_a_client_prepares_each_record_once() -> None:
    config = resolve_provider(make_settings(provider="deepseek", api_key="k"))
    records = _records()
    prepare = PreparedMessages(config)
    first = prepare(records)
    assert first == prepare_messages(records, config)
    assert all(a is b for a, b in zip(first, prepare(records), strict=True))
    copy: MessageRecord = {**records[3], "content": "expanded"}  # the same id, another dict
    assert prepare([*records[:3], copy])[3]["content"] == "expanded"
    assert prepare(records)[3]["content"] == "data"


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
