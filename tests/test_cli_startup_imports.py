"""`main.py cli -p` imports only what a one-shot task uses (issue 27: start-up within 1.15x of
`import openai`). The real CLI runs under `-X importtime` against the fake model, and the
modules it imported are read from that trace: no timing, so a loaded machine cannot flake it."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.fake_llm import Call, FakeLLM, Reply
from tests.kit.server import REPO, agent_argv, agent_env

# What the web server (and the payloads it validates), the MCP server and client, A2A, Docker,
# the file watcher, remote agents and the demo bring: a -p task on a plain workspace uses none
# of them; nor does a start with no .env to read need dotenv. (jinja2 and yaml are not here:
# the shipped agents are YAML and the system prompt is a Jinja2 template.)
NOT_FOR_CLI_P = (
    "a2a",
    "a2a_server",
    "docker",
    "dotenv",
    "engineio",
    "eventlet",
    "flask",
    "flask_socketio",
    "mcp",
    "mcp_server",
    "model.demo",
    "model.demo_inputs",
    "model.demo_reply",
    "model.demo_scripts",
    "model.demo_task",
    "modules.mcp",
    "modules.sandbox.docker_pool",
    "modules.sandbox.docker_runner",
    "modules.tools.remote_agents",
    "modules.workspace.file_watcher",
    "protocol.requests",
    "pydantic_settings",
    "readline",
    "redis",
    "socketio",
    "starlette",
    "uvicorn",
    "watchdog",
    "web",
    "web_server",
)
_IMPORTED = re.compile(r"^import time:\s+\d+\s+\|\s+\d+\s+\|\s*(\S+)\s*$", re.MULTILINE)


def imported_modules(stderr: str) -> set[str]:
    """The modules an `-X importtime` run imported, from its stderr."""
    return set(_IMPORTED.findall(stderr))


def forbidden(modules: set[str]) -> list[str]:
    """The modules of NOT_FOR_CLI_P (or inside one of them) among `modules`."""
    return sorted(
        name
        for name in modules
        if any(name == banned or name.startswith(banned + ".") for banned in NOT_FOR_CLI_P)
    )


def test_cli_p_imports_nothing_it_does_not_use(fake_llm: FakeLLM, tmp_path: Path):
    workspace, data = tmp_path / "ws", tmp_path / "data"
    workspace.mkdir()
    fake_llm.script(
        Reply(tool_calls=[Call("create_file", {"path": "a.txt", "content": "one\n"})]),
        Reply(content="Made a.txt."),
    )
    argv = agent_argv("cli", workspace, data, "-p", "make a file")
    done = subprocess.run(
        [sys.executable, "-X", "importtime", *argv[1:]],
        env=agent_env(fake_llm.base_url, fake_llm.api_key),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert (workspace / "a.txt").read_text() == "one\n"
    modules = imported_modules(done.stderr)
    assert {"openai", "core.services", "cli.session"} <= modules  # the trace was read
    assert forbidden(modules) == []


def test_the_check_sees_a_forbidden_import():
    """The same reading catches a module of the list, and one inside a listed package."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import web_server, modules.mcp.client"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    found = forbidden(imported_modules(done.stderr))
    assert "web_server" in found and "modules.mcp.client" in found
