"""Skills in use: the model loading one, the user invoking one from the CLI and from the page."""

from __future__ import annotations

import io
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from cli.session import run_command
from cli.terminal import CliTerminal
from core.services import build_services
from tests.fake_llm import Call, FakeLLM, Reply
from tests.kit.clients import Web
from tests.kit.server import agent_argv, agent_env
from tests.kit.settings import make_settings
from tests.kit.skills import add_skill, skill_md
from tests.kit.terminal import ask, make_terminal
from utils.errors import NotFound


def _workspace_skill(workspace: Path, name: str = "greet") -> None:
    add_skill(
        workspace / ".agents" / "skills",
        name,
        skill_md(name, description="Greets people warmly.", body="SECRET-BODY-42: wave."),
    )


def test_the_model_sees_the_catalog_and_loads_a_body(fake_llm: FakeLLM, tmp_path: Path) -> None:
    _workspace_skill(tmp_path / "ws")
    fake_llm.script(
        Reply(tool_calls=[Call("use_skill", {"name": "greet"})]), Reply(content="Waved.")
    )
    terminal = make_terminal(fake_llm, tmp_path)
    assert ask(terminal, "say hi") == "complete"
    system = fake_llm.chat_requests[0].messages[0]["content"]
    assert "# Skills" in system and "- greet: Greets people warmly." in system
    assert "SECRET-BODY-42" not in system
    assert "- summarize-csv:" in system  # the shipped ones too
    tool_message = fake_llm.chat_requests[1].messages[-1]
    assert tool_message["role"] == "tool" and "SECRET-BODY-42: wave." in tool_message["content"]


def test_a_task_with_a_skill_gives_the_body_with_the_message(
    fake_llm: FakeLLM, tmp_path: Path
) -> None:
    _workspace_skill(tmp_path / "ws")
    fake_llm.script(Reply(content="ok"))
    terminal = make_terminal(fake_llm, tmp_path)
    assert ask(terminal, "to Ann", skill="greet") == "complete"
    user = fake_llm.chat_requests[0].last_user_text
    assert "invoked the skill 'greet'" in user and "SECRET-BODY-42" in user
    assert user.endswith("to Ann")
    with pytest.raises(NotFound, match="no skill 'nope'"):
        ask(terminal, "x", skill="nope")


def test_cli_skill_command_in_a_subprocess(fake_llm: FakeLLM, tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    _workspace_skill(workspace)
    fake_llm.script(Reply(content="Done."))
    env = agent_env(fake_llm.base_url, fake_llm.api_key)
    argv = agent_argv("cli", workspace, tmp_path / "data", "-p")
    done = subprocess.run(
        [*argv, "/skill greet do it"], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    user = fake_llm.chat_requests[0].last_user_text
    assert "SECRET-BODY-42" in user and user.endswith("do it")
    unknown = subprocess.run(
        [*argv, "/skill nope do it"], env=env, capture_output=True, text=True, timeout=60
    )
    assert unknown.returncode == 2 and "no skill 'nope'" in unknown.stderr
    assert len(fake_llm.chat_requests) == 1


def test_cli_skills_lists_ready_and_broken_skills(fake_llm: FakeLLM, tmp_path: Path) -> None:
    _workspace_skill(tmp_path / "ws")
    add_skill(tmp_path / "ws" / ".agents" / "skills", "wrong", skill_md("other"))
    settings = make_settings(fake_llm, tmp_path, approval="ask")
    out = io.StringIO()
    terminal = CliTerminal(
        build_services(settings), out=out, err=io.StringIO(), stdin=io.StringIO()
    )
    run_command(terminal, "/skills")
    listed = out.getvalue()
    assert "greet" in listed and "Greets people warmly." in listed
    assert "changelog-entry" in listed and "summarize-csv" in listed
    assert "wrong" in listed and "broken: name 'other' differs" in listed


def test_socket_send_message_with_a_skill(web: Web, fake_llm: FakeLLM, tmp_path: Path) -> None:
    _workspace_skill(tmp_path / "ws")
    fake_llm.script(Reply(content="Done."))
    client = web.connect()
    status = client.call("get_status", {})
    assert {"name": "greet", "description": "Greets people warmly.", "user_only": False} in status[
        "skills"
    ]
    ack = client.call("send_message", {"conversation_id": None, "text": "hi", "skill": "greet"})
    assert ack["ok"], ack
    assert client.wait_done(ack["conversation_id"])[-1].payload["reason"] == "complete"
    user = fake_llm.chat_requests[0].last_user_text
    assert "SECRET-BODY-42" in user and user.endswith("hi")
    bad = client.call("send_message", {"conversation_id": None, "text": "hi", "skill": "nope"})
    assert bad["ok"] is False and bad["error"]["code"] == "not_found"
    assert "nope" in bad["error"]["message"]


def test_a_skills_allowed_tools_grant_nothing(
    make_web: Callable[..., Web], fake_llm: FakeLLM, tmp_path: Path
) -> None:
    """A workspace skill naming run_command in allowed-tools: in ask mode the command still
    waits for the user after the skill was used."""
    add_skill(
        tmp_path / "ws" / ".agents" / "skills",
        "deploy",
        skill_md("deploy", extra="allowed-tools: run_command Bash(*)\n", body="Run it."),
    )
    web = make_web(approval="ask")
    client = web.connect()
    fake_llm.script(
        Reply(tool_calls=[Call("use_skill", {"name": "deploy"})]),
        Reply(tool_calls=[Call("run_command", {"command": "echo deployed"})]),
        Reply(content="stopped"),
    )
    cid = client.send("deploy")
    asked = client.wait_for("tool", phase="approval")
    assert asked["name"] == "run_command"
    client.call("approve", {"conversation_id": cid, "call_id": asked["call_id"], "approved": False})
    assert client.wait_done(cid)[-1].payload["reason"] == "complete"
