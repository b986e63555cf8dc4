"""How a real server's replies end, as the fake plays llama-cpp-python 0.3's server and the
hosted APIs: a `finish_reason` that says the answer was cut, a null one before `[DONE]`, a
legacy `function_call`, and a request over the context window (llama-cpp-python streams
nothing for it; asked again unstreamed, it says why)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.services import build_services
from model.api_client import ApiClient
from model.errors import BadResponse, ContextTooLong
from tests.fake_llm import Call, ErrorReply, FakeLLM, RawReply, Reply
from tests.kit.fake_llm_http import chat, chunks, deltas, post
from tests.kit.model import make_client, run
from tests.kit.settings import make_settings
from tests.kit.terminal import TerminalRecorder, ask
from tests.kit.waits import wait_until
from utils.cancel import CancelToken, TaskCancelled

pytestmark = pytest.mark.usefixtures("clean_environment")

LONG = "word " * 800  # ~1000 tokens as the fake counts them
EMPTY_STREAM = RawReply("", "text/event-stream; charset=utf-8")


@pytest.fixture
def llama() -> Iterator[FakeLLM]:
    with FakeLLM("llamacpp") as server:
        yield server


def terminal_on(fake: FakeLLM, tmp_path: Path) -> TerminalRecorder:
    (tmp_path / "ws").mkdir(exist_ok=True)
    settings = make_settings(fake, tmp_path, provider="custom", model=fake.model)
    return TerminalRecorder(build_services(settings))


def llama_client(fake: FakeLLM) -> ApiClient:
    return make_client(fake, provider="custom", model=fake.model)


# --- the fake plays them as the real server sends them ---------------------------------------


def test_the_fake_refuses_a_request_over_its_window_as_llama_cpp_python_does():
    with FakeLLM("llamacpp", context_window=512) as llama:
        streamed = post(llama, chat(llama, [{"role": "user", "content": LONG}], stream=True))
        assert streamed.status_code == 200 and streamed.content == b""
        assert streamed.headers["content-type"].startswith("text/event-stream")
        unstreamed = post(llama, chat(llama, [{"role": "user", "content": LONG}], max_tokens=1))
        assert unstreamed.status_code == 400
        error = unstreamed.json()["error"]
        assert error["code"] == "context_length_exceeded" and error["param"] == "messages"
        assert error["message"].startswith("This model's maximum context length is 512 tokens.")
        assert llama.pending == 0  # a refusal takes no scripted reply
        llama.script(Reply(content="short"))
        assert post(llama, chat(llama, stream=True)).status_code == 200


def test_the_fake_sends_a_null_finish_reason_and_a_legacy_function_call(llama):
    llama.script(Reply(content="no finish", says_finish=False))
    sent = post(llama, chat(llama, stream=True))
    assert [c["choices"][0]["finish_reason"] for c in chunks(sent)][-1] is None
    assert sent.text.endswith("data: [DONE]\n\n")
    llama.script(Reply(tool_calls=[Call("list_files", {"path": "."})], legacy_call=True))
    sent = post(llama, chat(llama, stream=True))
    calls = [d["function_call"] for d in deltas(sent) if d.get("function_call")]
    assert calls[0]["name"] == "list_files"
    assert json.loads("".join(c["arguments"] for c in calls)) == {"path": "."}
    assert not any(d.get("tool_calls") for d in deltas(sent))
    assert chunks(sent)[-1]["choices"][0]["finish_reason"] == "function_call"


# --- finish_reason -----------------------------------------------------------------------------


def test_an_answer_cut_by_the_length_limit_is_said_and_the_task_completes(llama, tmp_path):
    terminal = terminal_on(llama, tmp_path)
    llama.script(Reply(content="The first part of an answer that", finish_reason="length"))
    assert ask(terminal, "explain everything") == "complete"
    [notice] = terminal.named("notice")
    assert notice["code"] == "length_limit" and "cut off" in notice["message"]
    assert terminal.conversation is not None
    assert terminal.conversation.path()[-1]["content"] == "The first part of an answer that"


def test_a_content_filter_stop_is_said(tmp_path):
    with FakeLLM("openai") as fake:
        terminal = TerminalRecorder(build_services(make_settings(fake, tmp_path)))
        fake.script(Reply(content="I can", finish_reason="content_filter"))
        assert ask(terminal, "something") == "complete"
    assert [n["code"] for n in terminal.named("notice")] == ["content_filter"]


def test_a_stream_ended_by_done_without_a_finish_reason_is_complete(llama, tmp_path):
    terminal = terminal_on(llama, tmp_path)
    llama.script(Reply(content="All of it.", says_finish=False))
    assert ask(terminal, "say it") == "complete"
    assert len(llama.chat_requests) == 1  # not retried as a broken stream
    assert terminal.named("notice") == [] and terminal.named("error") == []
    assert terminal.conversation is not None
    assert terminal.conversation.path()[-1]["content"] == "All of it."


def test_a_stream_cut_without_done_or_finish_reason_is_still_retried(llama):
    llama.script(Reply(content="lost", cut_after=1), Reply(content="second try"))
    items = run(llama_client(llama))
    assert items[-1].completion.content == "second try"  # type: ignore[union-attr]
    assert len(llama.chat_requests) == 2


def test_a_legacy_function_call_runs_with_an_id_of_ours(llama, tmp_path):
    terminal = terminal_on(llama, tmp_path)
    (tmp_path / "ws" / "notes.txt").write_text("hello\n")
    llama.script(
        Reply(tool_calls=[Call("read_file", {"path": "notes.txt"})], legacy_call=True),
        Reply(content="It says hello."),
    )
    assert ask(terminal, "what do my notes say?") == "complete"
    [start] = terminal.named("tool", phase="start")
    assert start["name"] == "read_file" and start["call_id"].startswith("call_0_")
    [result] = terminal.named("tool", phase="result")
    assert result["ok"] is True and "hello" in result["output"]
    assert [r.status for r in llama.chat_requests] == [200, 200]
    sent = llama.chat_requests[1].messages
    [asked] = [m for m in sent if m.get("tool_calls")]
    assert asked["tool_calls"][0]["id"] == start["call_id"]
    assert [m["tool_call_id"] for m in sent if m["role"] == "tool"] == [start["call_id"]]


# --- a request over the context window -------------------------------------------------------


def test_llama_cpps_empty_stream_is_asked_again_and_told_as_context_too_long(tmp_path):
    with FakeLLM("llamacpp", context_window=900) as llama:
        terminal = terminal_on(llama, tmp_path)
        assert ask(terminal, LONG) == "error"
        [error] = terminal.named("error")
        assert error["code"] == "context_too_long"
        assert "context window (900 tokens; this request needed" in error["message"]
        assert "/compact" in error["message"] and "AGENT_CONTEXT_WINDOW=900" in error["message"]
        assert terminal.named("done")[-1]["reason"] == "error"
        assert terminal.named("notice") == []  # not retried
        streamed, asked = llama.chat_requests
        assert streamed.body["stream"] is True and streamed.status == 200
        assert "stream" not in asked.body and "stream_options" not in asked.body
        assert asked.body["max_tokens"] == 1 and asked.status == 400
        assert asked.body["messages"] == streamed.body["messages"]
        llama.context_window = None  # a larger n_ctx: the same conversation goes on
        llama.script(Reply(content="Now it fits."))
        assert ask(terminal, "and now?") == "complete"


@pytest.mark.parametrize("flavour", ["openai", "deepseek", "kimi"])
def test_a_hosted_apis_refusal_is_context_too_long_with_its_window(flavour, tmp_path):
    with FakeLLM(flavour, context_window=900) as fake:
        terminal = TerminalRecorder(build_services(make_settings(fake, tmp_path)))
        assert ask(terminal, LONG) == "error"
        assert len(fake.chat_requests) == 1  # neither retried nor asked again
    [error] = terminal.named("error")
    assert error["code"] == "context_too_long"
    assert "(900 tokens" in error["message"] and "The server said: " in error["message"]


def test_llama_cpp_servers_own_refusal_is_read_from_its_fields(llama):
    body = {
        "error": {
            "code": 400,
            "message": "the request exceeds the available context size, try increasing it",
            "type": "exceed_context_size_error",
            "n_prompt_tokens": 1231,
            "n_ctx": 512,
        }
    }
    llama.script(RawReply(json.dumps(body), "application/json", status=400))
    with pytest.raises(ContextTooLong, match=r"\(512 tokens; this request needed 1231\)"):
        run(llama_client(llama))


def test_an_empty_stream_the_server_will_not_explain_is_a_bad_response(llama):
    llama.script(EMPTY_STREAM, Reply(content="x"))
    with pytest.raises(BadResponse, match=r"empty stream.*without saying why"):
        run(llama_client(llama))
    assert len(llama.chat_requests) == 2


def test_an_empty_stream_is_told_with_what_the_server_says_when_asked_again(llama):
    llama.script(EMPTY_STREAM, ErrorReply(400, "Tool choice 'make_plan' not in tools"))
    with pytest.raises(BadResponse, match=r"answered 400: .*'make_plan' not in tools"):
        run(llama_client(llama))


def test_a_cancel_stops_the_second_asking_at_once(llama):
    llama.script(EMPTY_STREAM, ErrorReply(400, "slow", latency=30))
    token, outcome = CancelToken(), []

    def stream() -> None:
        try:
            run(llama_client(llama), cancel=token)
        except TaskCancelled:
            outcome.append(time.monotonic())

    worker = threading.Thread(target=stream, daemon=True)
    worker.start()
    wait_until(lambda: len(llama.chat_requests) == 2, what="the second asking")
    cancelled = time.monotonic()
    token.cancel()
    worker.join(10)
    assert outcome and outcome[0] - cancelled < 2
