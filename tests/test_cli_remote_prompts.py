"""`cli --server` in tmux shows the message that started a task elsewhere (workspace_client
here) as its own prompt shows a line typed there, above the answer, and its own line once."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.fake_llm import FakeLLM, Reply
from tests.kit.server import REPO, ServerProcess, agent_env
from tests.kit.settings import TOKEN
from tests.kit.tty import Tmux, needs_tmux
from workspace_client import Client

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.usefixtures("clean_fake"),
    pytest.mark.server(files={"notes.md": "# Notes\n"}),
]


def _prompted(screen: str) -> bool:
    return screen.rstrip().endswith("›")


@needs_tmux()
def test_a_prompt_sent_by_the_client_library_shows_above_its_answer(
    server: ServerProcess, fake: FakeLLM, tmp_path: Path
):
    fake.script(Reply(content="First answer."), Reply(content="The client's answer."))
    env = {**agent_env(fake.base_url, fake.api_key), "AGENT_WEB_TOKEN": TOKEN}
    argv = [sys.executable, str(REPO / "main.py"), "cli", "--server", server.url]
    with Tmux(argv, env=env, cwd=tmp_path) as term:
        term.wait_for("/help for commands")
        term.type("typed in the terminal")
        term.wait_for(lambda s: "First answer." in s and _prompted(s))
        with Client(server.url, TOKEN) as other:
            cid = other.conversations()[0]["id"]  # the newest: the terminal's
            other.send("sent by a program\nover two lines", cid, attachments=["notes.md"])
            screen = term.wait_for(lambda s: "The client's answer." in s and _prompted(s))
        lines = screen.splitlines()
        asked = lines.index("› sent by a program")
        assert lines[asked + 1 : asked + 3] == ["  over two lines", "attached: notes.md"]
        assert asked < next(n for n, line in enumerate(lines) if "The client's answer." in line)
        assert screen.count("typed in the terminal") == 1  # its own line is not echoed
        term.keys("C-d")
        term.wait_for("[exit 0]")
