"""`/model` and `/config` in a real terminal (tmux), local and `cli --server` (issue 37, point
7): started without a key, the key and the model set at the prompt answer the next message with
no restart; the key is never printed back; a setting the environment fixes and a bad value are
refused saying why."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.fake_llm import FakeLLM, Reply
from tests.kit.server import REPO, ServerProcess, agent_argv, agent_env, without_settings
from tests.kit.tty import Tmux, needs_tmux

pytestmark = [needs_tmux()]

OTHER_MODEL = "deepseek-v4-pro"


def set_up_at_the_prompt(term: Tmux, fake: FakeLLM) -> None:
    """Refusals first, then the key and the model; a message is answered with both."""
    term.wait_for("/help for commands")
    term.type("/config")
    screen = term.wait_for("settings file:")
    assert "environment (AGENT_PROVIDER): fixed for this run" in screen
    assert any(line.split()[:3] == ["api_key", "not", "set"] for line in screen.splitlines())
    term.type("/config provider openai")
    term.wait_for("provider: fixed by AGENT_PROVIDER in the environment")
    term.type("/config budget_task lots")
    term.wait_for("budget_task: 'lots' is not a budget: write a budget as tokens")
    term.type(f"/config api_key {fake.api_key}")
    term.wait_for("saved; the next task uses it")
    term.type(f"/model {OTHER_MODEL}")
    term.wait_for(f"model: {OTHER_MODEL} (provider deepseek; settings file)")
    fake.script(Reply(content="Answered with the key set at the prompt."))
    term.type("hello")
    screen = term.wait_for("Answered with the key set at the prompt.")
    shown = screen.replace(f"/config api_key {fake.api_key}", "")
    assert fake.api_key not in shown, "the key is shown only where it was typed"
    request = fake.chat_requests[-1]
    assert request.headers["authorization"] == f"Bearer {fake.api_key}"
    assert request.body["model"] == OTHER_MODEL


def test_model_and_config_in_the_local_terminal(fake_llm: FakeLLM, tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    env = agent_env(fake_llm.base_url, fake_llm.api_key)
    del env["AGENT_API_KEY"]
    argv = agent_argv("cli", tmp_path / "ws", tmp_path / "data")
    with Tmux(argv, env=env, cwd=tmp_path) as term:
        set_up_at_the_prompt(term, fake_llm)
        term.keys("C-d")
        term.wait_for("[exit 0]")
    saved = json.loads((tmp_path / "data" / "settings.json").read_text())
    assert saved == {"api_key": fake_llm.api_key, "model": OTHER_MODEL}


def test_model_and_config_through_the_server(fake_llm: FakeLLM, tmp_path: Path) -> None:
    server = without_settings(ServerProcess.in_folder(tmp_path, fake_llm), "api_key")
    argv = [sys.executable, str(REPO / "main.py"), "cli", "--server", "SERVER"]
    with server.start():
        argv[-1] = server.url
        with Tmux(argv, env=agent_env(fake_llm.base_url, ""), cwd=tmp_path) as term:
            set_up_at_the_prompt(term, fake_llm)
            term.type("/config")
            screen = term.wait_for(str(server.data_dir / "settings.json"))
            assert "budget_task" in screen and "settings file" in screen
            term.keys("C-d")
            term.wait_for("[exit 0]")
