"""`web_search` is offered to the model only with a Tavily key, through the real server on the
fake model (which records each request): without TAVILY_API_KEY the tools sent leave it out, the
research agent's prompt does not tell the model to search the web, a call to it anyway is
refused saying why, and get_status says it is off and why; with a key it is sent and prompted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.fake_llm import Call, FakeLLM, Reply
from tests.kit.clients import connected
from tests.kit.server import serving

pytestmark = pytest.mark.e2e
SEARCH_PROMPT = "search the web (`web_search`)"


def _ask_research(fake: FakeLLM, root: Path, key: str, *replies: Reply) -> dict[str, Any]:
    """Send one message to the research agent on a server with TAVILY_API_KEY=`key`; its
    get_status answer (the fake keeps the requests the task made)."""
    fake.script(*replies)
    with serving(root, fake, {"TAVILY_API_KEY": key}, {"a.txt": "alpha\n"}) as server:
        with connected(server.url) as client:
            status = client.call("get_status")
            cid = client.start("what is in a.txt?", agent="research")
            client.wait_done(cid, timeout=60)
        assert server.stop() == 0, server.stderr
    return dict(status)


def _offered(fake: FakeLLM, index: int = 0) -> list[str]:
    body = fake.chat_requests[index].body
    return [tool["function"]["name"] for tool in body.get("tools", [])]


def _system(fake: FakeLLM, index: int = 0) -> str:
    return str(fake.chat_requests[index].messages[0]["content"])


def test_without_a_key_web_search_is_not_offered_nor_prompted(fake_llm: FakeLLM, tmp_path: Path):
    status = _ask_research(
        fake_llm,
        tmp_path,
        "",
        Reply(tool_calls=[Call("web_search", {"query": "alpha"})]),
        Reply(content="Only the workspace."),
    )
    assert status["tools_off"] == {"web_search": "no Tavily key is set (TAVILY_API_KEY)"}
    offered = _offered(fake_llm)
    assert "read_file" in offered and "web_search" not in offered
    system = _system(fake_llm)
    assert SEARCH_PROMPT not in system and "Web search is off here" in system
    refused = fake_llm.chat_requests[1].messages[-1]
    assert refused["role"] == "tool"
    assert "web_search is off: no Tavily key is set (TAVILY_API_KEY)" in refused["content"]


def test_with_a_key_web_search_is_offered_and_prompted(fake_llm: FakeLLM, tmp_path: Path):
    status = _ask_research(fake_llm, tmp_path, "tvly-test-key", Reply(content="Searched."))
    assert status["tools_off"] == {}
    assert "web_search" in _offered(fake_llm)
    system = _system(fake_llm)
    assert SEARCH_PROMPT in system and "Web search is off here" not in system
