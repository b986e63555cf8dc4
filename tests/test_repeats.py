"""Repeats that waste money (core/repeats.py), through the real server and CLI on the fake
model: the same call with the same result, an answer that loops (tests/test_streamed_loops.py
has more), and the repetition that is legitimate (the same call with a new result each time)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.fake_llm import Call, FakeLLM, Reply
from tests.fake_llm.replies import RecordedRequest
from tests.kit.clients import EventClient
from tests.kit.events import payloads
from tests.kit.server import ServerProcess, agent_argv, agent_env

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.usefixtures("clean_fake"),
    pytest.mark.server(files={"notes.txt": "buy milk\n", "status.txt": "0\n"}),
]
LOOPING = "I will read the file and then tell you what it says. " * 40


def tool_messages(request: RecordedRequest) -> list[str]:
    return [str(m["content"]) for m in request.messages if m["role"] == "tool"]


# --- the server ------------------------------------------------------------------------


def test_the_same_call_and_result_is_warned_then_ends_the_task(
    server: ServerProcess, fake: FakeLLM, client: EventClient
):
    before = len(fake.chat_requests)
    fake.responder = lambda request: Reply(tool_calls=[Call("read_file", {"path": "notes.txt"})])
    cid = client.start("what is in my notes?")
    events = client.wait_done(cid)
    assert events[-1].payload["reason"] == "loop"
    [error] = payloads(events, "error")
    assert error["code"] == "loop_detected"
    assert "read_file" in error["message"] and "5 times" in error["message"], error
    requests = fake.chat_requests[before:]
    assert len(requests) == 5  # the fifth result ends the task: no sixth call is paid for
    results = tool_messages(requests[-1])
    assert ["[warning]" in r for r in results] == [False, False, True, False]
    assert "3 times with these same arguments" in results[2]


def test_polling_a_file_that_changes_is_not_a_loop(
    server: ServerProcess, fake: FakeLLM, client: EventClient
):
    status = server.workspace / "status.txt"
    polls = 8

    def respond(request: RecordedRequest) -> Reply:
        done = len(tool_messages(request))
        if done == polls:
            return Reply(content="The job finished.")
        status.write_text(f"{done}\n")  # the job moves on between two reads
        return Reply(tool_calls=[Call("read_file", {"path": "status.txt"})])

    fake.responder = respond
    cid = client.start("wait for the job")
    events = client.wait_done(cid)
    assert events[-1].payload["reason"] == "complete"
    assert not payloads(events, "error")
    outputs = [p["output"] for p in payloads(events, "tool", phase="result")]
    assert len(outputs) == polls and not any("[warning]" in o for o in outputs)


def test_re_reading_a_file_after_each_edit_is_not_a_loop(
    server: ServerProcess, fake: FakeLLM, client: EventClient
):
    notes = server.workspace / "notes.txt"
    notes.write_text("line\n")
    steps: list[Call] = []
    for n in range(4):
        steps.append(Call("read_file", {"path": "notes.txt"}))
        edit = {
            "path": "notes.txt",
            "operation": "replace",
            "old_text": "line",
            "new_text": f"line{n}",
        }
        steps.append(Call("modify_file", edit))
    for call in steps:
        fake.script(Reply(tool_calls=[call]))
    fake.script(Reply(content="Edited four times."))
    cid = client.start("edit the notes four times")
    events = client.wait_done(cid)
    assert events[-1].payload["reason"] == "complete", payloads(events, "error")
    outputs = [p["output"] for p in payloads(events, "tool", phase="result")]
    assert not any("[warning]" in o for o in outputs), outputs


def test_a_reply_that_loops_is_stopped_as_it_streams_and_its_calls_never_run(
    server: ServerProcess, fake: FakeLLM, client: EventClient
):
    before = len(fake.chat_requests)
    fake.script(Reply(content=LOOPING, tool_calls=[Call("list_files", {})]))
    cid = client.start("look around")
    events = client.wait_done(cid)
    assert events[-1].payload["reason"] == "loop"
    [error] = payloads(events, "error")
    assert "reply repeated itself" in error["message"] and "times" in error["message"]
    assert len(fake.chat_requests) - before == 1
    assert not payloads(events, "tool")  # the call had not streamed yet: nothing ran


# --- the CLI ---------------------------------------------------------------------------


def run_cli(fake: FakeLLM, tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    return subprocess.run(
        agent_argv("cli", workspace, tmp_path / "data", *extra),
        env=agent_env(fake.base_url, fake.api_key),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )


def json_events(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def test_cli_an_answer_that_loops_exits_6_saying_what_repeated(fake: FakeLLM, tmp_path: Path):
    fake.script(Reply(content=LOOPING, usage=(50, 600)))
    result = run_cli(fake, tmp_path, "-p", "tell me", "--json")
    assert result.returncode == 6, result.stderr
    assert "error: loop_detected: The model's reply repeated itself" in result.stderr
    assert '"I will read the file and then tell you what it says.' in result.stderr
    done = json_events(result.stdout)[-1]
    assert done["event"] == "done" and done["reason"] == "loop"


def test_cli_the_same_call_and_result_exits_6(fake: FakeLLM, tmp_path: Path):
    fake.responder = lambda request: Reply(tool_calls=[Call("list_files", {})])
    result = run_cli(fake, tmp_path, "-p", "look")
    assert result.returncode == 6, result.stderr
    assert "list_files with the same arguments 5 times" in result.stderr
    assert "stopped: the model repeated itself." in result.stderr


def test_cli_the_same_command_with_new_output_each_time_completes(fake: FakeLLM, tmp_path: Path):
    command = {"command": "echo run >> log.txt; wc -l < log.txt"}

    def respond(request: RecordedRequest) -> Reply:
        if len(tool_messages(request)) == 7:
            return Reply(content="Ran it seven times.")
        return Reply(tool_calls=[Call("run_command", command)])

    fake.responder = respond
    result = run_cli(fake, tmp_path, "-p", "run it seven times", "--json")
    assert result.returncode == 0, result.stderr
    outputs = [e["output"] for e in json_events(result.stdout) if e.get("phase") == "result"]
    assert len(outputs) == 7 and not any("[warning]" in o for o in outputs)
