"""The fake model API served and scripted: keys, errors, cuts, pacing, records, its process."""

from __future__ import annotations

import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests

from tests.fake_llm import ErrorReply, FakeLLM, RecordedRequest, Reply
from tests.kit.fake_llm_http import chat, joined, post

ROOT = Path(__file__).resolve().parent.parent


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
