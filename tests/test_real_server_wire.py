"""What a real OpenAI-compatible server does that the hosted APIs do not, as the fake's
`llamacpp` flavour plays it (llama-cpp-python 0.3's server): no `usage` even when asked, a
first chunk with the role alone, call ids of its own shape repeated in every fragment beside
the legacy `function_call`; and a server that sends no call ids at all."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from core.services import build_services
from tests.fake_llm import Call, FakeLLM, Reply
from tests.kit.fake_llm_http import chat, deltas, post
from tests.kit.settings import make_settings
from tests.kit.terminal import TerminalRecorder, ask


@pytest.fixture
def llama() -> Iterator[FakeLLM]:
    with FakeLLM("llamacpp") as server:
        yield server


def terminal_on(fake: FakeLLM, tmp_path: Path) -> TerminalRecorder:
    settings = make_settings(fake, tmp_path, provider="custom", model=fake.model)
    return TerminalRecorder(build_services(settings))


def test_the_fake_streams_as_llama_cpp_does(llama):
    body = chat(llama, stream=True, stream_options={"include_usage": True})
    llama.script(Reply(content="Hi there"))
    response = post(llama, body)
    assert '"usage"' not in response.text
    assert deltas(response)[0] == {"role": "assistant"}


def test_no_usage_is_estimated_and_marked_so_in_done_history_and_task_end(llama, tmp_path):
    terminal = terminal_on(llama, tmp_path)
    llama.script(Reply(content="A short answer about the workspace."))
    assert ask(terminal, "say something") == "complete"
    usage = terminal.named("done")[-1]["usage"]
    assert usage["estimated"] is True
    assert usage["prompt_tokens"] > 100  # the system prompt and the tools, estimated
    assert 5 <= usage["completion_tokens"] <= 20
    assert terminal.conversation is not None
    answer = terminal.conversation.path()[-1]
    assert answer["meta"]["usage"] == {
        "prompt_tokens": usage["prompt_tokens"],
        "completion_tokens": usage["completion_tokens"],
        "estimated": True,
    }
    ends = terminal.conversation.current_meta()["meta"]["task_ends"]
    assert next(iter(ends.values()))["usage"]["estimated"] is True


def test_a_counted_usage_is_not_marked_estimated(tmp_path):
    with FakeLLM("openai") as fake:
        terminal = TerminalRecorder(build_services(make_settings(fake, tmp_path)))
        fake.script(Reply(content="Counted.", usage=(321, 7)))
        assert ask(terminal, "count") == "complete"
    assert terminal.named("done")[-1]["usage"] == {
        "prompt_tokens": 321,
        "completion_tokens": 7,
        "estimated": False,
        "cost": {"amount": 0.000907, "currency": "USD"},  # the openai preset's model's price
    }
    assert terminal.conversation is not None
    assert "estimated" not in terminal.conversation.path()[-1]["meta"]["usage"]


@pytest.mark.parametrize("call_id", [None, ""], ids=["llama-cpp ids", "no ids"])
def test_tool_calls_with_the_servers_ids_or_none_run_and_the_follow_up_is_valid(
    llama, tmp_path, call_id
):
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "notes.txt").write_text("hello\n")
    terminal = terminal_on(llama, tmp_path)
    llama.script(
        Reply(tool_calls=[Call("read_file", {"path": "notes.txt"}, id=call_id)]),
        Reply(tool_calls=[Call("list_files", {}, id=call_id)]),
        Reply(content="It says hello."),
    )
    assert ask(terminal, "what do my notes say?") == "complete"
    assert [r.status for r in llama.chat_requests] == [200, 200, 200]
    starts = terminal.named("tool", phase="start")
    ids = [s["call_id"] for s in starts]
    assert len(set(ids)) == 2 and all(ids)
    if call_id is None:
        assert all(i.startswith("call__0_") for i in ids)
    results = terminal.named("tool", phase="result")
    assert results[0]["ok"] is True and "hello" in results[0]["output"]
    sent = llama.chat_requests[2].messages
    assert [m["tool_call_id"] for m in sent if m["role"] == "tool"] == ids
