"""/ps, /logs and /stop in the terminal, local (`main.py cli`) and on a server (`cli --server`),
each a real process reading its commands from stdin, on the fake model whose task starts a
server in the background of the conversation's sandbox session (bubblewrap)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.fake_llm import Call, FakeLLM, Reply
from tests.kit.server import REPO, ServerProcess, agent_argv, agent_env
from tests.kit.settings import TOKEN

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.usefixtures("clean_fake"),
    pytest.mark.server(env={"AGENT_SANDBOX": "local"}),
]

SERVER = "python3 -u -m http.server 8000 --bind 127.0.0.1"
LINES = ["start it", "/status", "/ps", "/logs p1", "/stop p1", "/ps", "/logs", "/stop p9", "/quit"]


def script(fake: FakeLLM) -> None:
    """The task starts SERVER in the background and waits for its first line."""
    waited = {"process_id": "p1", "pattern": "Serving HTTP", "wait_seconds": 60}
    fake.script(
        Reply(tool_calls=[Call("run_command", {"command": SERVER, "background": True})]),
        Reply(tool_calls=[Call("process_output", waited)]),
        Reply(content="It runs."),
    )


def run(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        argv,
        env=env,
        cwd=REPO,
        input="\n".join(LINES) + "\n",
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    if "sandbox bubblewrap" not in done.stdout:
        pytest.skip("bubblewrap is not usable here")
    return done


def check(done: subprocess.CompletedProcess[str]) -> None:
    """What the commands printed, in order: listed running with its port, its last output,
    stopped, listed stopped; a missing ID and an unknown process are refused saying so."""
    out, err = done.stdout, done.stderr
    assert "It runs." in out
    assert "sandbox bubblewrap · network off:" in out  # /status says the sessions' network
    running = f"p1  running  :8000  {SERVER}"
    stopped = f"p1  stopped  -  {SERVER}"
    assert out.count(running) == 2, out  # /ps, then /logs's first line
    logged = out.rindex("Serving HTTP on 127.0.0.1 port 8000")  # the task printed it too
    assert out.rindex(running) < logged < out.index(stopped)
    assert out.count(stopped) == 2, out  # /stop, then /ps
    assert "usage: /logs ID (/ps lists them)" in err
    assert "p9" in err and "/ps lists them" in err


def test_the_local_terminal_lists_reads_and_stops_its_processes(
    fake_llm: FakeLLM, tmp_path: Path
) -> None:
    script(fake_llm)
    workspace, data = tmp_path / "ws", tmp_path / "data"
    workspace.mkdir()
    env = {**agent_env(fake_llm.base_url, fake_llm.api_key), "AGENT_SANDBOX": "local"}
    check(run(agent_argv("cli", workspace, data, "--approval", "auto"), env))


def test_the_remote_terminal_does_the_same_through_the_server(
    server: ServerProcess, fake: FakeLLM
) -> None:
    script(fake)
    env = agent_env(fake.base_url, fake.api_key)
    argv = [sys.executable, str(REPO / "main.py"), "cli", "--server", server.url]
    check(run([*argv, "--approval", "auto"], {**env, "AGENT_WEB_TOKEN": TOKEN}))
