"""Who and where a bubblewrap session says it is, through the real server: its own host name
(`workspace`, in its own UTS namespace) and, started by root, its uid named `user` by a
/etc/passwd of its own; neither the host's name nor the host's user of that uid shows, in
the agent's commands or in the prompt of the person's terminal."""

from __future__ import annotations

import os
import socket

import pytest

from tests.kit.clients import EventClient
from tests.kit.model import run_calls
from tests.kit.terminal_ops import open_terminal, screen, shows, type_in

pytestmark = [pytest.mark.e2e, pytest.mark.server(env={"AGENT_SANDBOX": "local"})]
AS_ROOT = os.geteuid() == 0
WHO = "echo host=$(hostname) user=$(id -un) group=$(id -gn)"


def test_the_agents_commands_see_the_sandboxs_name(agent: EventClient) -> None:
    [result], _ = run_calls(agent, [("run_command", {"command": WHO})])
    assert "host=workspace " in result["output"], result
    if AS_ROOT:
        assert "user=user group=user" in result["output"], result


def test_the_terminals_prompt_names_the_sandbox_not_the_host(agent: EventClient) -> None:
    cid = run_calls(agent, [("run_command", {"command": "true"})])[1]
    tid = open_terminal(agent, cid)
    type_in(agent, cid, tid, WHO + "\n")
    shows(agent, cid, tid, "host=workspace")
    type_in(agent, cid, tid, 'echo "prompt=${PS1@P}"\n')
    shows(agent, cid, tid, "prompt=")
    seen = screen(agent, cid, tid)
    assert "@workspace" in seen and "I have no name!" not in seen, seen[-400:]
    assert f"@{socket.gethostname()}" not in seen, seen[-400:]
    if AS_ROOT:
        assert "user@workspace" in seen, seen[-400:]
    assert agent.call("terminal_close", {"conversation_id": cid, "terminal_id": tid})["ok"]
