"""`main.py cli -p` as a user runs it: a real subprocess against the fake model server."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.fake_llm import Call, ErrorReply, FakeLLM, Reply
from tests.kit.processes import live_command_lines
from tests.kit.server import agent_argv, agent_env
from tests.kit.waits import wait_until


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    workspace, data = tmp_path / "ws", tmp_path / "data"
    workspace.mkdir()
    return workspace, data


def _argv(dirs: tuple[Path, Path], *extra: str) -> list[str]:
    return agent_argv("cli", *dirs, *extra)


def run_cli(
    fake_llm: FakeLLM, dirs: tuple[Path, Path], *extra: str, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        _argv(dirs, *extra),
        env=agent_env(fake_llm.base_url, fake_llm.api_key),
        cwd=dirs[0].parent,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def events(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def test_multi_step_task_then_continue_the_conversation(fake_llm: FakeLLM, dirs: tuple[Path, Path]):
    workspace, data = dirs
    fake_llm.script(
        Reply(
            tool_calls=[
                Call("create_file", {"path": "notes/a.txt", "content": "one\n"}),
                Call("create_file", {"path": "b.txt", "content": "bee"}),
            ],
            split_seed=7,
            interleave=True,
        ),
        Reply(
            tool_calls=[
                Call(
                    "modify_file",
                    {"path": "notes/a.txt", "operation": "append", "content": "two\n"},
                )
            ]
        ),
        Reply(
            tool_calls=[Call("rename_file", {"old_path": "notes/a.txt", "new_path": "notes/c.txt"})]
        ),
        Reply(tool_calls=[Call("delete_file", {"path": "b.txt"})]),
        Reply(content="Done: **notes/c.txt** has two lines.", usage=(900, 12)),
    )
    first = run_cli(fake_llm, dirs, "-p", "make some notes", "--json")
    assert first.returncode == 0, first.stderr
    assert (workspace / "notes/c.txt").read_text() == "one\ntwo\n"
    assert not (workspace / "notes/a.txt").exists() and not (workspace / "b.txt").exists()
    evs = events(first.stdout)
    assert [e["seq"] for e in evs] == list(range(evs[0]["seq"], evs[0]["seq"] + len(evs)))
    assert evs[-1]["event"] == "done" and evs[-1]["reason"] == "complete"
    results = [e for e in evs if e["event"] == "tool" and e["phase"] == "result"]
    assert [r["name"] for r in results] == [
        "create_file",
        "create_file",
        "modify_file",
        "rename_file",
        "delete_file",
    ]
    assert all(r["ok"] for r in results)
    answer = "".join(e["text"] for e in evs if e["event"] == "token")
    assert answer == "Done: **notes/c.txt** has two lines."
    conversation_id = evs[0]["conversation_id"]

    fake_llm.script(Reply(content="You asked me to make notes."))
    second = run_cli(fake_llm, dirs, "-p", "what did I ask?", "--conversation", conversation_id)
    assert second.returncode == 0, second.stderr
    assert "You asked me to make notes." in second.stdout
    sent = fake_llm.chat_requests[-1].messages
    assert [m["role"] for m in sent][:3] == ["system", "user", "assistant"]
    assert sent[1]["content"] == "make some notes" and sent[-1]["content"] == "what did I ask?"
    assert sum(1 for m in sent if m["role"] == "tool") == 5
    lines = (data / "conversations" / conversation_id / "messages.jsonl").read_text().splitlines()
    assert len(lines) == 1 + 5 + 5 + 1 + 1  # user, assistants, tools, user, assistant


def test_cancel_during_a_long_command_kills_it(fake_llm: FakeLLM, dirs: tuple[Path, Path]):
    workspace, _ = dirs
    marker = f"{time.time_ns() % 10**6}.5"  # a unique sleep length names our processes
    fake_llm.script(
        Reply(
            tool_calls=[
                Call(
                    "run_command",
                    {"command": f"sleep {marker} & sleep {marker}; wait", "timeout": 300},
                )
            ]
        )
    )
    process = subprocess.Popen(
        _argv(dirs, "-p", "run something long"),
        env=agent_env(fake_llm.base_url, fake_llm.api_key, PYTHONFAULTHANDLER="1"),
        cwd=workspace.parent,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_until(
        lambda: len(_processes_running(f"sleep {marker}")) >= 2,
        20,
        "the command to start",
        every=0.05,
    )
    started = time.monotonic()
    process.send_signal(signal.SIGINT)
    stderr = _stderr_or_stacks(process, 20)
    assert time.monotonic() - started < 5
    assert process.returncode == 130, stderr
    assert "cancelled" in stderr
    assert _processes_running(f"sleep {marker}") == []


def _stderr_or_stacks(process: subprocess.Popen[str], seconds: float) -> str:
    """The process's stderr once it ended; if it has not within `seconds`, it is made to
    print every thread's stack (faulthandler, on SIGABRT) and the test fails with them."""
    try:
        return process.communicate(timeout=seconds)[1]
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGABRT)
        _, stderr = process.communicate(timeout=30)
        pytest.fail(f"the CLI did not end {seconds} s after Ctrl-C; its threads:\n{stderr}")


def _processes_running(command_line: str) -> list[int]:
    """Live (not zombie) processes whose command line is exactly `command_line`."""
    return [pid for pid, argv in live_command_lines().items() if argv == command_line]


def test_rate_limit_is_retried(fake_llm: FakeLLM, dirs: tuple[Path, Path]):
    fake_llm.script(
        ErrorReply(status=429, message="Rate limit reached", retry_after=0.3),
        Reply(content="after the wait"),
    )
    started = time.monotonic()
    result = run_cli(fake_llm, dirs, "-p", "hello")
    assert result.returncode == 0, result.stderr
    assert "after the wait" in result.stdout
    assert len(fake_llm.chat_requests) == 2
    assert time.monotonic() - started >= 0.3


def test_every_raw_delta_reaches_the_debug_stream_log_before_exit(
    fake_llm: FakeLLM, dirs: tuple[Path, Path]
):
    _, data = dirs
    answer = "A short answer, written out before the process ends."
    fake_llm.script(Reply(content=answer, chunk_size=4, usage=(20, 13)))
    result = run_cli(fake_llm, dirs, "-p", "hello")
    assert result.returncode == 0, result.stderr
    lines = (data / "logs" / "debug_stream.log").read_text().splitlines()
    chunks = [json.loads(json.loads(line)["raw"]) for line in lines]
    texts = [choice["delta"].get("content") or "" for c in chunks for choice in c["choices"]]
    assert "".join(texts) == answer
    assert chunks[-1]["usage"]["completion_tokens"] == 13  # the last chunk too


def test_cut_stream_is_reported_and_partial_answer_kept(fake_llm: FakeLLM, dirs: tuple[Path, Path]):
    _, data = dirs
    fake_llm.script(
        Reply(content="The first part of a long answer that never ends", chunk_size=5, cut_after=4)
    )
    result = run_cli(fake_llm, dirs, "-p", "tell me")
    assert result.returncode == 1
    reason = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(reason) == 1 and "stream" in reason[0].lower()
    conversation = next((data / "conversations").iterdir())
    records = [json.loads(x) for x in (conversation / "messages.jsonl").read_text().splitlines()]
    assert records[-1]["role"] == "assistant"
    assert records[-1]["meta"]["interrupted"] == "stream_cut"
    assert records[-1]["content"] and "The first part".startswith(records[-1]["content"][:14])


def test_a_model_that_never_answers_is_stopped_after_20_calls(
    fake_llm: FakeLLM, dirs: tuple[Path, Path]
):
    def respond(request: Any) -> Reply:
        calls = sum(m["role"] == "tool" for m in request.messages)
        return Reply(tool_calls=[Call("read_file", {"path": f"missing-{calls}.txt"})])

    fake_llm.responder = respond
    result = run_cli(fake_llm, dirs, "-p", "loop forever", "--json")
    assert result.returncode == 3, result.stderr
    assert "20 model calls" in result.stderr
    assert len(fake_llm.chat_requests) == 20
    assert events(result.stdout)[-1]["reason"] == "max_iterations"


def test_an_agents_own_step_limit_is_the_one_reported(fake_llm: FakeLLM, dirs: tuple[Path, Path]):
    agents = dirs[0] / ".agents" / "agents"
    agents.mkdir(parents=True)
    (agents / "brief.yaml").write_text("name: brief\ndescription: Few steps.\nmax_iterations: 3\n")
    fake_llm.responder = lambda request: Reply(tool_calls=[Call("list_files", {})])
    result = run_cli(fake_llm, dirs, "-p", "loop forever", "--agent", "brief")
    assert result.returncode == 3, result.stderr
    assert "stopped after 3 model calls, the agent's max_iterations" in result.stderr
    assert len(fake_llm.chat_requests) == 3


def test_missing_key_fails_with_one_line(dirs: tuple[Path, Path]):
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("AGENT_") and not k.endswith("_API_KEY")
    }
    env["AGENT_PROVIDER"] = "deepseek"
    result = subprocess.run(
        _argv(dirs, "-p", "hi"),
        env=env,
        cwd=dirs[0].parent,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert "DEEPSEEK_API_KEY" in result.stderr


def test_a_data_folder_it_cannot_write_is_one_clear_line(tmp_path: Path, fake_llm: FakeLLM):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    dirs = (tmp_path / "ws", blocker / "data")
    dirs[0].mkdir()
    for front in (["cli", "-p", "hi"], ["web", "--port", "0"]):
        argv = agent_argv(front[0], *dirs, *front[1:])
        result = subprocess.run(
            argv,
            env=agent_env(fake_llm.base_url, fake_llm.api_key),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 2, result.stderr
        assert "Traceback" not in result.stderr
        assert result.stderr.startswith("error: cannot start:") and "a-file" in result.stderr


AGENT_FILES = {
    "planner.yaml": "name: planner\ndescription: Plans, then does.\nmode: plan_execute\n",
    "boss.yaml": "name: boss\ndescription: Hands work down.\nagents: [middle]\n",
    "middle.yaml": "name: middle\ndescription: Hands work further down.\nagents: [coder]\n",
}


def _write_agents(data: Path) -> None:
    folder = data / "agents"  # the user's: from the workspace, plan_execute would not load
    folder.mkdir(parents=True)
    for name, text in AGENT_FILES.items():
        (folder / name).write_text(text)


def _plan_script() -> list[Reply]:
    return [
        Reply(tool_calls=[Call("make_plan", {"steps": ["Look", "Write"]})]),
        Reply(tool_calls=[Call("list_files", {})]),
        Reply(tool_calls=[Call("finish_step", {"ok": True, "summary": "looked"})]),
        Reply(tool_calls=[Call("finish_step", {"ok": False, "summary": "no pen"})]),
        Reply(tool_calls=[Call("make_plan", {"steps": ["Write with a pencil"]})]),
        Reply(tool_calls=[Call("finish_step", {"ok": True, "summary": "wrote"})]),
        Reply(content="Final answer"),
    ]


def _delegation_script() -> list[Reply]:
    return [
        Reply(tool_calls=[Call("delegate_to_middle", {"task": "get hello.txt made"})]),
        Reply(
            content="Asking the coder.",
            tool_calls=[Call("delegate_to_coder", {"task": "make hello.txt"})],
        ),
        Reply(
            content="Creating it.",
            tool_calls=[Call("create_file", {"path": "hello.txt", "content": "hi"})],
        ),
        Reply(content="Done: hello.txt"),
        Reply(content="The coder made it."),
        Reply(content="All done."),
    ]


def test_plan_and_sub_agent_events_say_whose_they_are(fake_llm: FakeLLM, dirs: tuple[Path, Path]):
    workspace, data = dirs
    _write_agents(data)
    fake_llm.script(*_plan_script())
    result = run_cli(fake_llm, dirs, "-p", "look, then write", "--agent", "planner", "--json")
    assert result.returncode == 0, result.stderr
    plans = [e for e in events(result.stdout) if e["event"] == "plan"]
    assert [(p["phase"], p.get("step")) for p in plans] == [
        ("created", None),
        ("step_started", 1),
        ("step_finished", 1),
        ("step_started", 2),
        ("step_finished", 2),
        ("replanned", None),
        ("step_started", 3),
        ("step_finished", 3),
        ("finished", None),
    ]
    assert plans[4]["status"] == "failed" and plans[5]["reason"] == "no pen"
    final = plans[-1]["plan"]
    assert final["revision"] == 1
    assert [(s["title"], s["status"]) for s in final["steps"]] == [
        ("Look", "done"),
        ("Write", "failed"),
        ("Write with a pencil", "done"),
    ]

    fake_llm.script(*_delegation_script())
    result = run_cli(fake_llm, dirs, "-p", "hello file please", "--agent", "boss", "--json")
    assert result.returncode == 0, result.stderr
    assert (workspace / "hello.txt").read_text() == "hi"
    evs = events(result.stdout)
    starts = {e["name"]: e for e in evs if e["event"] == "tool" and e["phase"] == "start"}
    to_middle, to_coder = starts["delegate_to_middle"], starts["delegate_to_coder"]
    assert "parent_call_id" not in to_middle and to_middle["agent"] == "boss"
    assert to_coder["parent_call_id"] == to_middle["call_id"] and to_coder["depth"] == 1
    create = starts["create_file"]
    assert create["agent"] == "coder" and create["depth"] == 2
    assert create["parent_call_id"] == to_coder["call_id"]
    said: dict[tuple[str, int | None], str] = {}
    for e in evs:
        if e["event"] == "token":
            who = (e["agent"], e.get("depth"))
            said[who] = said.get(who, "") + e["text"]
    assert said == {
        ("middle", 1): "Asking the coder.The coder made it.",
        ("coder", 2): "Creating it.Done: hello.txt",
        ("boss", None): "All done.",
    }


def test_text_mode_prints_the_plan_and_indents_sub_agents(
    fake_llm: FakeLLM, dirs: tuple[Path, Path]
):
    _write_agents(dirs[1])
    fake_llm.script(*_plan_script())
    result = run_cli(fake_llm, dirs, "-p", "look, then write", "--agent", "planner")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "Final answer\n"  # -p: the answer on stdout, progress on stderr
    lines = result.stderr.splitlines()
    at = lines.index("Plan (revision 0):")
    assert lines[at + 1 : at + 3] == ["  1. ○ Look", "  2. ○ Write"]
    for line in (
        "▸ step 1: Look",
        "✓ step 1: looked",
        "✗ step 2: no pen",
        "re-planning: no pen",
        "Plan (revision 1):",
        "  3. ○ Write with a pencil",
        "✓ step 3: wrote",
    ):
        assert line in lines, (line, lines)
    assert not any("finish_step" in line or "make_plan" in line for line in lines)

    fake_llm.script(*_delegation_script())
    result = run_cli(fake_llm, dirs, "-p", "hello file please", "--agent", "boss")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "All done.\n"
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    start = next(n for n, line in enumerate(lines) if line.startswith("⚙ delegate_to_middle"))
    assert lines[start + 1 : start + 8] == [
        "↳ middle:",
        "  Asking the coder.",
        '  ⚙ delegate_to_coder {"task": "make hello.txt"}',
        "  ↳ coder:",
        "    Creating it.",
        '    ⚙ create_file {"path": "hello.txt", "content": "hi"}',
        lines[start + 7],
    ]
    assert lines[start + 7].startswith("    ✓ create_file (")
    assert "    Done: hello.txt" in lines
    assert any(line.startswith("  ✓ delegate_to_coder (") for line in lines)
    assert "  The coder made it." in lines
