"""`cli --server` when its server goes away or restarts with another token: it says so at
once, at the prompt or while a task streams, never a silent wait or a traceback."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.fake_llm import FakeLLM, Reply
from tests.kit.server import REPO, ServerProcess, agent_env
from tests.kit.tty import Tmux, needs_tmux

pytestmark = [needs_tmux()]
OTHER_TOKEN = "another-token-after-the-restart-0123"


def terminal_on(server: ServerProcess, fake: FakeLLM, cwd: Path) -> Tmux:
    argv = [sys.executable, str(REPO / "main.py"), "cli", "--server", server.url]
    env = agent_env(fake.base_url, fake.api_key)  # its AGENT_WEB_TOKEN is TOKEN
    return Tmux(argv, env=env, cwd=cwd)


def test_a_server_restarted_with_another_token_ends_the_terminal_saying_why(
    fake_llm: FakeLLM, tmp_path: Path
) -> None:
    server = ServerProcess.in_folder(tmp_path, fake_llm).start()
    try:
        with terminal_on(server, fake_llm, tmp_path) as term:
            term.wait_for("/help for commands")
            server.stop()
            term.wait_for("was lost: reconnecting…", timeout=10)
            server.env["AGENT_WEB_TOKEN"] = OTHER_TOKEN
            server.restart()
            screen = term.wait_for("[exit 2]", timeout=15)
            assert "refused the token" in screen and "DATA_DIR/web_token" in screen
            assert "Traceback" not in screen
    finally:
        server.stop()


def test_a_server_that_comes_back_is_said_to_and_the_terminal_goes_on(
    fake_llm: FakeLLM, tmp_path: Path
) -> None:
    fake_llm.script(Reply(content="Still here after the restart."))
    server = ServerProcess.in_folder(tmp_path, fake_llm).start()
    try:
        with terminal_on(server, fake_llm, tmp_path) as term:
            term.wait_for("/help for commands")
            server.restart()
            term.wait_for("was lost: reconnecting…", timeout=10)
            term.wait_for("reconnected to", timeout=20)
            term.type("are you there?")
            screen = term.wait_for("Still here after the restart.")
            assert "Traceback" not in screen
            term.keys("C-d")
            term.wait_for("[exit 0]")
    finally:
        server.stop()
