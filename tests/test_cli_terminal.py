"""The terminal as a user meets it: `-p` keeps stdout for the final answer, a failure is said
once, the exit codes, and `/history` opening a conversation by number or id prefix (in tmux)."""

from __future__ import annotations

import re
import socket
import subprocess
from pathlib import Path

import pytest

from history.store import ConversationStore
from tests.fake_llm import Call, FakeLLM, Reply
from tests.kit.server import agent_argv
from tests.kit.tty import Tmux, clean_env, needs_tmux

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    folder = tmp_path / "ws"
    folder.mkdir()
    return folder


def _env(base_url: str, api_key: str = "key") -> dict[str, str]:
    return clean_env(
        AGENT_PROVIDER="deepseek",
        AGENT_BASE_URL=base_url,
        AGENT_API_KEY=api_key,
        AGENT_MODE="fast",
        AGENT_APPROVAL="auto",
        AGENT_RETRY_BASE_DELAY="0.05",
    )


def _argv(workspace: Path, *extra: str) -> list[str]:
    return agent_argv("cli", workspace, workspace.parent / "data", *extra)


def _run(
    workspace: Path, env: dict[str, str], *extra: str, stderr: int = subprocess.PIPE
) -> subprocess.CompletedProcess[str]:
    """The CLI run to its end, stdout captured apart from stderr (or with it: STDOUT)."""
    return subprocess.run(
        _argv(workspace, *extra),
        env=env,
        cwd=workspace.parent,
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
        timeout=60,
    )


def _script(fake_llm: FakeLLM) -> None:
    fake_llm.script(
        Reply(content="I'll look around first.", tool_calls=[Call("list_files", {})]),
        Reply(content="The workspace is empty."),
    )


def test_one_shot_prints_only_the_final_answer_on_stdout(fake_llm: FakeLLM, workspace: Path):
    _script(fake_llm)
    result = _run(workspace, _env(fake_llm.base_url, fake_llm.api_key), "-p", "look around")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "The workspace is empty.\n"
    err = result.stderr
    assert "I'll look around first." in err  # the words between tool calls: progress
    assert (
        err.index("I'll look around first.")
        < err.index("⚙ list_files")
        < err.index("The workspace is empty.")
    )

    _script(fake_llm)  # stdout and stderr in one pipe: the answer is there once
    both = _run(
        workspace,
        _env(fake_llm.base_url, fake_llm.api_key),
        "-p",
        "look around",
        stderr=subprocess.STDOUT,
    )
    assert both.returncode == 0, both.stdout
    assert both.stdout.count("The workspace is empty.") == 1, both.stdout


def _prompted(screen: str) -> bool:
    """Whether the session waits at its prompt (keys sent before would be lost)."""
    return screen.rstrip().endswith("›")


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_network_failure_is_said_once_and_exits_1(workspace: Path):
    env = _env(f"http://127.0.0.1:{_closed_port()}/v1")
    result = _run(workspace, env, "-p", "hello")
    assert result.returncode == 1
    errors = [line for line in result.stderr.splitlines() if line.startswith("error")]
    assert len(errors) == 1, result.stderr
    assert "Cannot reach the model API" in errors[0]
    assert result.stdout == ""


def test_exit_code_2_for_what_the_user_must_fix(fake_llm: FakeLLM, workspace: Path):
    env = _env(fake_llm.base_url, fake_llm.api_key)
    bad = _run(workspace, env, "-p", "hi", "--no-such-option")
    assert bad.returncode == 2 and "unrecognized arguments" in bad.stderr
    unknown = _run(workspace, env, "-p", "hi", "--conversation", "ec771d")
    assert unknown.returncode == 2
    assert unknown.stderr.strip() == "error: no conversation 'ec771d' (/history lists them)"
    no_key = _run(workspace, {**env, "AGENT_API_KEY": ""}, "-p", "hi")
    assert no_key.returncode == 2 and "error:" in no_key.stderr
    agent = _run(workspace, env, "-p", "hi", "--agent", "nobody")
    assert agent.returncode == 2 and "nobody" in agent.stderr
    assert fake_llm.chat_requests == []


def _stored(data: Path) -> tuple[list[str], str]:
    """Conversations made in the data folder (as another run would), until two ids start with
    the same letter; their ids, oldest first, and that letter."""
    store = ConversationStore(data)
    ids: list[str] = []
    while True:
        conversation = store.create(title=f"chat {len(ids)}")
        conversation.append("user", f"question {len(ids)}")
        ids.append(conversation.id)
        firsts = [i[0] for i in ids if i[0].isalpha()]
        shared = next((first for first in firsts if firsts.count(first) > 1), None)
        if shared is not None and len(ids) >= 6:
            return ids, shared


def test_a_conversation_is_continued_by_an_id_prefix(fake_llm: FakeLLM, workspace: Path):
    ids, shared = _stored(workspace.parent / "data")
    env = _env(fake_llm.base_url, fake_llm.api_key)
    ambiguous = _run(workspace, env, "-p", "hi", "--conversation", shared)
    assert ambiguous.returncode == 2
    assert f"'{shared}' starts " in ambiguous.stderr and "type more of it" in ambiguous.stderr
    fake_llm.script(Reply(content="Continued."))
    result = _run(workspace, env, "-p", "go on", "--conversation", ids[3][:8])
    assert result.returncode == 0, result.stderr
    assert f"conversation: {ids[3]}" in result.stderr
    sent = [m["content"] for m in fake_llm.chat_requests[-1].messages if m["role"] == "user"]
    assert sent == ["question 3", "go on"]


@needs_tmux()
def test_history_opens_a_conversation_by_number_or_id_prefix(fake_llm: FakeLLM, workspace: Path):
    ids, shared = _stored(workspace.parent / "data")
    listed = min(len(ids), 20)
    with Tmux(
        _argv(workspace), env=_env(fake_llm.base_url, fake_llm.api_key), cwd=workspace.parent
    ) as term:
        term.wait_for("/help for commands")
        term.type("/history")
        screen = term.wait_for("opens one")
        rows = dict(re.findall(r"^ *(\d+)  ([0-9a-f]{32})  ", screen, re.MULTILINE))
        assert sorted(rows.values()) == sorted(ids[-listed:])
        term.type(f"/history {listed}")
        term.wait_for(f"opened {rows[str(listed)]} (chat ")
        term.type(f"/history {ids[5][:6].upper()}")
        term.wait_for(f"opened {ids[5]} (chat 5): 1 messages")
        term.type(f"/history {shared}")
        term.wait_for("type more of it")
        term.type(f"/history {listed + 1}")
        term.wait_for(f"no conversation number {listed + 1}: /history lists {listed}")
        term.type("/history ec771dzz")
        term.wait_for("no conversation 'ec771dzz' (/history lists them)")
        fake_llm.script(Reply(content="Back in chat five."))
        term.type("and now?")
        term.wait_for(lambda screen: "Back in chat five." in screen and _prompted(screen))
        term.keys("C-d")
        term.wait_for("[exit 0]")
    sent = [m["content"] for m in fake_llm.chat_requests[-1].messages if m["role"] == "user"]
    assert sent == ["question 5", "and now?"]


@needs_tmux()
def test_make_demo_in_the_terminal_ends_cleanly_after_ctrl_c_then_ctrl_d(tmp_path: Path):
    # The repository's Makefile run from a folder of its own (the demo's data lands there).
    for name in (".venv", "main.py", "scripts", "demo"):
        (tmp_path / name).symlink_to(REPO / name)
    argv = ["make", "-f", str(REPO / "Makefile"), "-o", "install", "demo", "DEMO_FRONT=cli"]
    with Tmux(argv, env=clean_env(), cwd=tmp_path) as term:
        term.wait_for(lambda screen: "/help for commands" in screen and _prompted(screen))
        term.keys("C-c")
        term.wait_for(lambda screen: _prompted(screen) and screen.count("›") == 2)
        term.keys("C-d")
        screen = term.wait_for("[exit ")
    assert "[exit 0]" in screen and "Interrupt" not in screen, screen
