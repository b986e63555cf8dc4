"""`main.py cli --server URL`: the terminal on a running web workspace (`main.py web` on the
fake model), through workspace_client: `-p`, refusals, and the interactive session in tmux."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.fake_llm import Call, FakeLLM, Reply
from tests.tty_helpers import Tmux, needs_tmux
from tests.web_helpers import REPO, TOKEN, ServerProcess, agent_env, free_port
from workspace_client import Client

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("clean_fake")]


def _argv(url: str, *extra: str) -> list[str]:
    return [sys.executable, str(REPO / "main.py"), "cli", "--server", url, *extra]


def _env(fake: FakeLLM, **extra: str) -> dict[str, str]:
    env = agent_env(fake.base_url, fake.api_key)
    del env["AGENT_WEB_TOKEN"]
    return {**env, **extra}


def _run(url: str, fake: FakeLLM, *extra: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        _argv(url, *extra),
        env=_env(fake, **env),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


def test_p_runs_one_task_on_the_server_and_prints_the_answer(server: ServerProcess, fake: FakeLLM):
    fake.script(Reply(content="Answered by the server.", chunk_size=3))
    done = _run(server.url, fake, "--token", TOKEN, "-p", "say it")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Answered by the server.\n"
    [cid] = [
        line.split()[1] for line in done.stderr.splitlines() if line.startswith("conversation:")
    ]
    with Client(server.url, TOKEN) as client:
        messages = client.get_conversation(cid)["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant"]
    # the token in the URL the server printed does too, and the conversation goes on
    fake.script(Reply(content="Second answer."))
    again = _run(f"{server.url}/?token={TOKEN}", fake, "-p", "more", "--conversation", cid[:10])
    assert again.returncode == 0, again.stderr
    assert again.stdout == "Second answer.\n" and f"conversation: {cid}" in again.stderr


def test_p_json_prints_the_events_and_a_declined_call_exits_4(server: ServerProcess, fake: FakeLLM):
    fake.script(
        Reply(tool_calls=[Call("run_command", {"command": "echo hi"})]), Reply(content="fine")
    )
    done = _run(server.url, fake, "-p", "run it", "--approval", "ask", AGENT_WEB_TOKEN=TOKEN)
    assert done.returncode == 4, done.stderr
    assert "error: declined: run_command needed approval" in done.stderr
    fake.script(Reply(content="as json"))
    json_run = _run(server.url, fake, "--json", "-p", "x", AGENT_WEB_TOKEN=TOKEN)
    assert json_run.returncode == 0, json_run.stderr
    names = [line.split('"')[3] for line in json_run.stdout.splitlines()]
    assert names[-1] == "done" and "token" in names


def test_a_wrong_token_a_missing_one_and_no_server_exit_2(server: ServerProcess, fake: FakeLLM):
    wrong = _run(server.url, fake, "--token", "not-the-token-at-all", "-p", "x")
    assert wrong.returncode == 2 and "refused the token" in wrong.stderr, wrong.stderr
    missing = _run(server.url, fake, "-p", "x")
    assert missing.returncode == 2 and "needs the web server's token" in missing.stderr
    nobody = _run(f"http://127.0.0.1:{free_port()}", fake, "--token", TOKEN, "-p", "x")
    assert nobody.returncode == 2 and "is `main.py web` running" in nobody.stderr, nobody.stderr
    unknown = _run(server.url, fake, "--token", TOKEN, "-p", "x", "--conversation", "zz99")
    assert unknown.returncode == 2 and "no conversation 'zz99'" in unknown.stderr


def _prompted(screen: str) -> bool:
    return screen.rstrip().endswith("›")


@needs_tmux()
def test_the_terminal_asks_an_approval_and_lists_the_servers_conversations(
    server: ServerProcess, fake: FakeLLM, tmp_path: Path
):
    fake.script(
        Reply(tool_calls=[Call("run_command", {"command": "echo from-the-terminal"})]),
        Reply(content="The command ran."),
    )
    argv = _argv(server.url, "--approval", "ask")
    with Tmux(argv, env=_env(fake, AGENT_WEB_TOKEN=TOKEN), cwd=tmp_path) as term:
        term.wait_for("/help for commands")
        term.type("run the echo")
        term.wait_for("Allow? [y]es / [n]o / [a]lways for this tool:")
        term.type("y")
        screen = term.wait_for(lambda s: "The command ran." in s and _prompted(s))
        assert "from-the-terminal" in screen
        term.type("/history")
        screen = term.wait_for("opens one")
        assert "run the echo" in screen
        term.type("/status")
        term.wait_for("approval ask")
        term.type("/mcp restart nothing")
        term.wait_for("no MCP server 'nothing'")
        term.type("/bogus")
        term.wait_for("unknown command /bogus")
        term.keys("C-d")
        term.wait_for("[exit 0]")
