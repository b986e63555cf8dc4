"""What `main.py web` and `main.py cli` check before they start (modules/workspace/folder.py,
web_server.check_port): a port taken is said before any URL; ./workspace is made on first
start, but a --workspace that does not exist is refused (exit 2, nothing made) unless --create
asks for it; a file given as the workspace is said to be one."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fake_llm import FakeLLM, Reply
from tests.kit.mcp_servers import FIXTURE, write_config
from tests.kit.server import REPO, agent_argv, agent_env
from tests.kit.waits import SLOWNESS

FRONTS = [["web", "--port", "0"], ["cli", "-p", "hi"]]


def run(argv: list[str], fake: FakeLLM, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv,
        env=agent_env(fake.base_url, fake.api_key),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60 * SLOWNESS,
    )


def test_a_port_taken_is_said_before_any_url_and_nothing_starts(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    (tmp_path / "ws").mkdir()
    # MCP servers configured: they used to start, and be cut off, before the port was found taken.
    write_config(
        tmp_path / "data" / "mcp.json",
        {"fixture": {"command": sys.executable, "args": [str(FIXTURE), "--marker", "port-taken"]}},
    )
    with socket.socket() as other_program:
        other_program.bind(("127.0.0.1", 0))
        other_program.listen()
        port = other_program.getsockname()[1]
        argv = agent_argv("web", tmp_path / "ws", tmp_path / "data", "--port", str(port))
        done = run(argv, fake_llm, REPO)
    assert done.returncode == 2
    assert "http://" not in done.stdout
    assert done.stderr.startswith(
        f"error: cannot start: port {port} on 127.0.0.1 is already in use"
    )
    assert f"--port {port + 1}" in done.stderr and f"make run PORT={port + 1}" in done.stderr
    assert "never awaited" not in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "data" / "logs" / "mcp").exists(), "an MCP server was started"


@pytest.mark.parametrize("front", FRONTS, ids=lambda f: f[0])
def test_a_workspace_that_does_not_exist_is_refused_and_not_made(
    tmp_path: Path, fake_llm: FakeLLM, front: list[str]
) -> None:
    missing = tmp_path / "typo" / "deeper" / "ws"
    done = run(agent_argv(front[0], missing, tmp_path / "data", *front[1:]), fake_llm, tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"error: the workspace {missing} does not exist. Create it with: mkdir -p {missing}  "
        "(or start with --create to have it made)"
    ]
    assert not (tmp_path / "typo").exists()
    assert "http://" not in done.stdout


def test_create_makes_the_workspace_it_names(tmp_path: Path, fake_llm: FakeLLM) -> None:
    wanted = tmp_path / "new" / "ws"
    fake_llm.script(Reply(content="Made."))
    done = run(
        agent_argv("cli", wanted, tmp_path / "data", "--create", "-p", "hi"), fake_llm, tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Made."
    assert wanted.is_dir()


def test_the_default_workspace_is_made_on_first_start(tmp_path: Path, fake_llm: FakeLLM) -> None:
    fake_llm.script(Reply(content="Here."))
    argv = [sys.executable, str(REPO / "main.py"), "cli", "-p", "hi"]
    done = run(argv, fake_llm, tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "workspace").is_dir() and (tmp_path / "data").is_dir()


@pytest.mark.parametrize("front", FRONTS, ids=lambda f: f[0])
def test_a_file_as_the_workspace_is_said_to_be_one(
    tmp_path: Path, fake_llm: FakeLLM, front: list[str]
) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("a file")
    for workspace, said in (
        (notes, f"error: the workspace {notes} is a file, not a folder"),
        (
            notes / "ws",
            f"error: the workspace {notes / 'ws'} cannot be a folder: {notes} is a file",
        ),
    ):
        done = run(
            agent_argv(front[0], workspace, tmp_path / "data", *front[1:]), fake_llm, tmp_path
        )
        assert done.returncode == 2
        assert done.stderr.startswith(said), done.stderr
        assert "Errno" not in done.stderr and "Traceback" not in done.stderr
    assert notes.read_text() == "a file"
