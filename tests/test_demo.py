"""The demo model (AGENT_PROVIDER=demo): its scripts, through the CLI and through the server."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from model.completion import ContentDelta, ReasoningDelta, StreamEnd
from model.demo import DemoModel
from model.demo_scripts import DEMO_DIR, load_scripts
from model.messages import ChatMessage
from model.tool_calls import ToolCallArgs, ToolCallStarted
from tests.kit.clients import connected
from tests.kit.demo import BUGGY, FIXED
from tests.kit.server import ServerProcess, agent_argv
from tests.kit.tty import clean_env
from utils.cancel import CancelToken, TaskCancelled


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    folder = tmp_path / "ws"
    shutil.copytree(DEMO_DIR / "workspace", folder)
    return folder


TOOLS: list[dict[str, Any]] = [
    {"type": "function", "function": {"name": name}}
    for name in (
        "read_file",
        "list_files",
        "search_code",
        "run_command",
        "run_python",
        "modify_file",
        "propose_edit",
    )
]


def _play(
    model: DemoModel,
    messages: Sequence[ChatMessage],
    *,
    thinking: bool = True,
    tools: list[dict[str, Any]] = TOOLS,
) -> list:
    return list(model.stream(messages, tools, thinking=thinking, cancel=CancelToken()))


def test_the_script_follows_the_message_and_what_became_of_its_calls():
    scripts = load_scripts()
    assert scripts.pick("Give me a tour of this workspace").name == "tour"
    assert scripts.pick("summarise data.csv in this workspace").name == "summary"
    assert scripts.pick("hello there").name == "help"
    assert scripts.suggestions == [
        "Give me a tour of this workspace",
        "Fix the bug in calc.py",
        "Summarise data.csv",
    ]
    model = DemoModel(pace=0)
    user: ChatMessage = {"role": "user", "content": "fix the bug in calc.py"}
    first = _play(model, [{"role": "system", "content": "..."}, user])
    assert isinstance(first[0], ReasoningDelta) and isinstance(first[-1], StreamEnd)
    assert sum(isinstance(i, ContentDelta) for i in first) > 3  # word by word
    completion = first[-1].completion
    assert [c.name for c in completion.tool_calls] == ["read_file"]
    assert "".join(i.text for i in first if isinstance(i, ContentDelta)) == completion.content
    args = "".join(i.delta for i in first if isinstance(i, ToolCallArgs))
    assert json.loads(args) == {"path": "calc.py"}
    assert not any(isinstance(i, ReasoningDelta) for i in _play(model, [user], thinking=False))

    def answered(completion: Any, content: str, ok: bool) -> list[ChatMessage]:
        call = completion.tool_calls[0]
        return [
            {"role": "assistant", "content": completion.content, "tool_calls": [call.to_message()]},
            {"role": "tool", "tool_call_id": call.id, "content": content, "meta": {"ok": ok}},
        ]

    turn = [user, *answered(completion, f"    12\t{BUGGY}", True)]
    test = _play(model, turn)[-1].completion
    assert test.tool_calls[0].name == "run_command"
    declined = _play(
        model,
        [
            *turn,
            *answered(
                test, "The user declined this run_command call. Do not retry it as is.", False
            ),
        ],
    )
    after = declined[-1].completion
    assert "won't run anything" in after.content and after.tool_calls[0].name == "modify_file"
    assert not any(isinstance(i, ReasoningDelta) for i in declined)  # the step does not think
    started = [i for i in declined if isinstance(i, ToolCallStarted)]
    assert started[0].call_id == after.tool_calls[0].id
    reading_only = [t for t in TOOLS if t["function"]["name"] != "run_command"]
    refused = _play(model, turn, tools=reading_only)[-1].completion
    assert not refused.tool_calls and "`run_command`" in refused.content


def test_it_streams_at_a_pace_and_stops_at_once_when_cancelled():
    model, cancel = DemoModel(pace=1), CancelToken()
    stream = model.stream(
        [{"role": "user", "content": "tour"}], TOOLS, thinking=True, cancel=cancel
    )
    started = time.monotonic()
    next(stream)
    assert time.monotonic() - started >= 0.3  # a model's first-token latency
    cancel.cancel()
    with pytest.raises(TaskCancelled):
        next(stream)
    assert time.monotonic() - started < 1


def test_the_cli_plays_the_fix_with_real_tools(workspace: Path):
    env = clean_env(AGENT_PROVIDER="demo", AGENT_DEMO_PACE="0.02")
    argv = agent_argv(
        "cli", workspace, workspace.parent / "data", "--mode", "thinking", "--approval", "auto"
    )
    result = subprocess.run(
        [*argv, "-p", "Fix the bug in calc.py", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines()]
    kinds = [e["event"] for e in events]
    assert kinds.count("thinking") > 5 and kinds.count("token") > 50
    starts = [e["name"] for e in events if e["event"] == "tool" and e["phase"] == "start"]
    assert starts == ["read_file", "run_command", "modify_file", "run_command"]
    output = "".join(e["delta"] for e in events if e.get("phase") == "output")
    assert "FAIL: test_average" in output and "\nOK" in output
    results = [e["ok"] for e in events if e.get("phase") == "result"]
    assert results == [True, False, True, True]  # the tests fail, then pass
    assert events[-1]["event"] == "done" and events[-1]["reason"] == "complete"
    assert FIXED in (workspace / "calc.py").read_text()

    text = subprocess.run(
        [*argv, "-p", "hello"], env=env, capture_output=True, text=True, timeout=60
    )
    assert text.returncode == 0, text.stderr
    assert text.stderr.startswith("DEMO · a scripted model")
    assert "Fix the bug in calc.py" in text.stderr.splitlines()[1]
    assert "I'm the **demo model**" in text.stdout and "thinking:" in text.stderr


def test_the_page_plays_the_fix_with_approvals_then_undoes_it(workspace: Path):
    server = ServerProcess(
        workspace,
        workspace.parent / "data",
        base_url="",
        api_key="",
        env={
            "AGENT_PROVIDER": "demo",
            "AGENT_DEMO_PACE": "0.02",
            "AGENT_APPROVAL": "ask",
            "AGENT_MODE": "thinking",
        },
    )
    with server, connected(server.url) as client:
        status = client.call("get_status")
        assert status["demo"] is True and status["api"]["configured"] is True
        assert "Fix the bug in calc.py" in status["demo_suggestions"]
        conversation = client.start("Fix the bug in calc.py")
        approvals: list[dict[str, Any]] = []
        for expected in ("run_command", "modify_file", "run_command"):
            request = client.wait_until(
                lambda events: next(
                    (
                        e.payload
                        for e in events
                        if e.name == "tool"
                        and e.payload["phase"] == "approval"
                        and e.payload not in approvals
                    ),
                    None,
                ),
                20,
                f"approval of {expected}",
            )
            assert request["name"] == expected
            approvals.append(request)
            ack = client.call(
                "approve",
                {"conversation_id": conversation, "call_id": request["call_id"], "approved": True},
            )
            assert ack["ok"], ack
        events = client.wait_done(conversation, 30)
        assert approvals[1]["preview"].startswith("--- a/calc.py\n+++ b/calc.py\n")
        assert f"-{BUGGY}" in approvals[1]["preview"] and f"+{FIXED}" in approvals[1]["preview"]
        names = [e.name for e in events]
        assert names.count("thinking") > 5 and names.count("token") > 50
        output = "".join(e.payload["delta"] for e in events if e.payload.get("phase") == "output")
        assert "FAILED (failures=1, errors=1)" in output and "Ran 5 tests" in output
        assert events[-1].payload["reason"] == "complete"
        assert FIXED in (workspace / "calc.py").read_text()

        undone = client.call("undo_task", {"conversation_id": conversation})
        assert undone["ok"] and "calc.py" in undone["restored"], undone
        assert BUGGY in (workspace / "calc.py").read_text()

        declined = client.start("Fix the bug in calc.py")
        for _ in range(2):  # the command, then the edit: both declined
            request = client.wait_until(
                lambda events: next(
                    (
                        e.payload
                        for e in events
                        if e.name == "tool"
                        and e.payload["phase"] == "approval"
                        and e.payload["conversation_id"] == declined
                        and e.payload not in approvals
                    ),
                    None,
                ),
                20,
                "an approval",
            )
            approvals.append(request)
            client.call(
                "approve",
                {"conversation_id": declined, "call_id": request["call_id"], "approved": False},
            )
        events = client.wait_done(declined, 30)
        proposal = next(
            e.payload["details"]["proposal"]
            for e in events
            if e.payload.get("phase") == "result" and e.payload["name"] == "propose_edit"
        )
        assert proposal["path"] == "calc.py" and f"+{FIXED}" in proposal["diff"]
        assert BUGGY in (workspace / "calc.py").read_text()  # nothing written
        answer = "".join(e.payload["text"] for e in events if e.name == "token")
        assert "I left `calc.py` as it was" in answer
