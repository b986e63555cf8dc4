"""Writes to Workspace Agent's own configuration (`.agents/**`, `.mcp.json`) ask even in auto mode,
saying why: file tools before they run, a command's changes after it (held, put back unless
approved), on the real server process and the fake model; `cli -p` without a terminal declines."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fake_llm import Call, FakeLLM, Reply
from tests.kit.clients import EventClient
from tests.kit.events import Received, payloads
from tests.kit.server import ServerProcess, agent_argv, agent_env
from tests.kit.settings import TOKEN
from tests.kit.tools import state

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("clean_fake")]

AGENT = ".agents/agents/general.yaml"
OLD_AGENT = "name: general\ndescription: the user's own\n"
REASON = f"{AGENT}, which Workspace Agent reads as an agent definition"
ALWAYS = "Changes to Workspace Agent's own configuration always ask, even in auto mode"


@pytest.fixture
def ws(server: ServerProcess) -> Iterator[Path]:
    """The module server's workspace, emptied, holding the user's agent definition."""
    root = server.workspace
    for entry in root.iterdir():
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()
    (root / AGENT).parent.mkdir(parents=True)
    (root / AGENT).write_text(OLD_AGENT)
    yield root


def answer(client: EventClient, cid: str, asked: dict[str, Any], approved: bool, **extra: Any):
    ack = client.call(
        "approve",
        {"conversation_id": cid, "call_id": asked["call_id"], "approved": approved, **extra},
    )
    assert ack["ok"], ack
    return ack


def second_approval(client: EventClient) -> dict[str, Any]:
    return client.wait_until(
        lambda events: payloads(events, "tool", phase="approval")[1:],
        what="a second approval",
    )[0]


def results(events: list[Received]) -> list[dict[str, Any]]:
    return payloads(events, "tool", phase="result")


def tool_messages(fake: FakeLLM) -> list[str]:
    """What the model was sent as tool results in its last request."""
    return [m["content"] for m in fake.chat_requests[-1].messages if m.get("role") == "tool"]


# --- file tools --------------------------------------------------------------------------


@pytest.mark.parametrize("approved", [False, True])
def test_an_agent_definition_written_in_auto_mode_waits_for_the_user(
    fake: FakeLLM, client: EventClient, ws: Path, approved: bool
):
    fake.script(
        Reply(tool_calls=[Call("create_file", {"path": AGENT, "content": "name: general\n"})]),
        Reply(content="Done."),
    )
    cid = client.start("make the general agent plainer")  # the server's default is auto
    asked = client.wait_for("tool", phase="approval", name="create_file")
    first, *rest = asked["preview"].split("\n")
    assert first == (
        f"This changes {REASON} or its prompt file: it can change what the agent is told and "
        "may do."
    )
    assert rest[:2] == [f"--- a/{AGENT}", f"+++ b/{AGENT}"]  # then the diff, as ever
    assert asked["warnings"] == [
        f"touches {REASON} or its prompt file: it can change what the agent is told and may "
        f"do. {ALWAYS}"
    ]
    answer(client, cid, asked, approved)
    events = client.wait_done(cid)
    [result] = results(events)
    if approved:
        assert result["ok"] and (ws / AGENT).read_text() == "name: general\n"
    else:
        assert not result["ok"]
        declined = "The user declined this create_file call. Do not retry it as is."
        assert result["output"] == declined and tool_messages(fake) == [declined]
        assert (ws / AGENT).read_text() == OLD_AGENT


def _link_into_agents(root: Path) -> None:
    os.symlink(".agents/agents", root / "shortcut")


def _mine(root: Path) -> None:
    (root / "mine.yaml").write_text("name: mine\n")


# (what the model calls, the path the reason names, what the workspace holds first)
SPELLINGS: dict[str, tuple[Call, str, Callable[[Path], None] | None]] = {
    "rename into .agents": (
        Call("rename_file", {"old_path": "mine.yaml", "new_path": ".agents/agents/mine.yaml"}),
        ".agents/agents/mine.yaml",
        _mine,
    ),
    "rename out of .agents": (
        Call("rename_file", {"old_path": AGENT, "new_path": "general.yaml"}),
        AGENT,
        None,
    ),
    "delete .agents/ (a trailing slash)": (
        Call("delete_file", {"path": ".agents/"}),
        ".agents, which Workspace Agent reads as the folder of its agent definitions",
        None,
    ),
    "a path through x/..": (
        Call("create_file", {"path": "./x/../.agents/skills/s/SKILL.md", "content": "hi\n"}),
        ".agents/skills/s/SKILL.md, which Workspace Agent reads as a skill",
        None,
    ),
    ".mcp.json": (
        Call("create_file", {"path": ".mcp.json", "content": '{"mcpServers": {}}\n'}),
        ".mcp.json, which Workspace Agent reads as the workspace's MCP servers",
        None,
    ),
    "a link named elsewhere": (
        Call("create_file", {"path": "shortcut/general.yaml", "content": "name: x\n"}),
        REASON,
        _link_into_agents,
    ),
    "a new folder": (
        Call("create_folder", {"path": ".agents/skills/new"}),
        ".agents/skills/new, which Workspace Agent reads as a skill",
        None,
    ),
    "an append": (
        Call("modify_file", {"path": AGENT, "operation": "append", "content": "tools: ['*']\n"}),
        REASON,
        None,
    ),
}


@pytest.mark.parametrize("spelling", list(SPELLINGS))
def test_every_spelling_of_a_configuration_change_asks_and_a_decline_keeps_it_as_it_was(
    fake: FakeLLM, client: EventClient, ws: Path, spelling: str
):
    tool_call, named, setup = SPELLINGS[spelling]
    if setup is not None:
        setup(ws)
    before = state(ws)
    fake.script(Reply(tool_calls=[tool_call]), Reply(content="Left as it is."))
    cid = client.start(f"try {spelling}")
    asked = client.wait_for("tool", phase="approval", name=tool_call.name)
    assert asked["preview"].startswith(f"This changes {named}")
    assert any(named in warning and ALWAYS in warning for warning in asked["warnings"])
    answer(client, cid, asked, False)
    [result] = results(client.wait_done(cid))
    assert not result["ok"] and "declined" in result["output"]
    assert state(ws) == before


def test_always_allowing_the_tool_does_not_silence_a_configuration_change(
    fake: FakeLLM, client: EventClient, ws: Path
):
    (ws / "notes.txt").write_text("old notes\n")
    fake.script(
        Reply(tool_calls=[Call("create_file", {"path": ".mcp.json", "content": "{}\n"})]),
        Reply(tool_calls=[Call("create_file", {"path": "notes.txt", "content": "new\n"})]),
        Reply(tool_calls=[Call("create_file", {"path": AGENT, "content": "name: general\n"})]),
        Reply(content="Done."),
    )
    cid = client.start("write them", approval="ask")
    asked = client.wait_for("tool", phase="approval", name="create_file")
    assert asked["preview"].startswith("This changes .mcp.json")  # a new file: asked all the same
    ack = answer(client, cid, asked, True, always=True)
    assert ack["always_allowed"] == ["create_file"]
    # the overwrite of notes.txt now runs unasked; the agent definition still asks
    again = second_approval(client)
    assert again["preview"].startswith(f"This changes {REASON}")
    answer(client, cid, again, False)
    events = client.wait_done(cid)
    assert len(payloads(events, "tool", phase="approval")) == 2
    assert [r["ok"] for r in results(events)] == [True, True, False]
    assert (ws / "notes.txt").read_text() == "new\n" and (ws / AGENT).read_text() == OLD_AGENT


def test_ordinary_writes_in_auto_mode_still_run_unasked(
    fake: FakeLLM, client: EventClient, ws: Path
):
    fake.script(
        Reply(
            tool_calls=[
                Call("create_file", {"path": "agents/notes.md", "content": "mine\n"}),
                Call("create_file", {"path": ".agents-old/x.yaml", "content": "old\n"}),
                Call("run_command", {"command": f"touch {AGENT}; echo hi > out.txt"}),
            ]
        ),
        Reply(content="Done."),
    )
    events = client.wait_done(client.start("write elsewhere"))
    assert payloads(events, "tool", phase="approval") == []
    assert all(result["ok"] for result in results(events))
    assert (ws / "out.txt").read_text() == "hi\n"  # touching a definition changed nothing in it


def test_a_preview_of_difflibs_worst_case_comes_at_once(
    fake: FakeLLM, client: EventClient, ws: Path
):
    """Every other line of 20,000 changed: difflib took a minute to make the preview, in the
    task's thread, before the user was even asked."""
    old = "".join(f"line {i}\n" for i in range(20_000))
    new = "".join(f"line {i}\n" if i % 2 else f"changed {i}\n" for i in range(20_000))
    (ws / "big.txt").write_text(old)
    fake.script(
        Reply(tool_calls=[Call("create_file", {"path": "big.txt", "content": new})]),
        Reply(content="Done."),
    )
    cid = client.start("rewrite big.txt", approval="ask")
    asked = client.wait_for("tool", timeout=20, phase="approval", name="create_file")
    assert asked["preview"].split("\n")[2].startswith("@@ -1,20000 +1,20000 @@ too long")
    answer(client, cid, asked, False)
    client.wait_done(cid)
    assert (ws / "big.txt").read_text() == old


def test_the_pages_auto_choice_says_configuration_changes_still_ask(server: ServerProcess):
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor())  # the token's cookie
    with opener.open(f"{server.url}/?token={TOKEN}", timeout=30) as response:
        page = response.read().decode()
    [auto] = re.findall(r'<option value="auto"[^>]*>[^<]*</option>', page)
    assert "config changes ask" in auto and "run every tool" not in auto, auto
    assert ".agents/" in auto and ".mcp.json" in auto  # its title names what still asks


# --- commands ----------------------------------------------------------------------------

WRITES_CONFIG = (
    f"printf 'name: evil\\n' > {AGENT} && printf '{{}}\\n' > .mcp.json && echo kept > notes.txt"
)


def test_a_commands_changes_to_the_configuration_are_put_back_when_declined(
    fake: FakeLLM, client: EventClient, ws: Path
):
    fake.script(
        Reply(tool_calls=[Call("run_command", {"command": WRITES_CONFIG})]),
        Reply(content="It ran."),
    )
    cid = client.start("run it")
    asked = client.wait_for("tool", phase="approval", name="run_command")
    shown = asked["preview"]
    assert shown.startswith(f"This command changed {REASON}")
    assert (
        "This command changed .mcp.json, which Workspace Agent reads as the workspace's MCP"
        in shown
    )
    assert "-description: the user's own\n" in shown and "+name: evil\n" in shown
    assert "--- /dev/null\n+++ b/.mcp.json\n" in shown and "notes.txt" not in shown
    assert len(asked["warnings"]) == 2 and all(ALWAYS in w for w in asked["warnings"])
    answer(client, cid, asked, False)
    events = client.wait_done(cid)
    [result] = results(events)
    assert result["ok"]  # the command itself ran; what it did to the configuration is undone
    note = result["output"].split("\n[", 1)[1]
    assert note.startswith(
        "Put back as they were before this command, because these changes to Workspace "
        f"Agent's own configuration were not approved: {AGENT}, .mcp.json."
    )
    assert "create_file" in note and result["output"] in tool_messages(fake)
    assert (ws / AGENT).read_text() == OLD_AGENT and not (ws / ".mcp.json").exists()
    assert (ws / "notes.txt").read_text() == "kept\n"
    # undo then removes the ordinary file and leaves the put-back paths as they are
    undone = client.call("undo_task", {"conversation_id": cid})
    assert undone["ok"] and undone["removed"] == ["notes.txt"], undone
    assert not (ws / "notes.txt").exists() and not (ws / ".mcp.json").exists()
    assert (ws / AGENT).read_text() == OLD_AGENT


def test_approved_changes_of_a_command_stay_and_undo_still_puts_them_back(
    fake: FakeLLM, client: EventClient, ws: Path
):
    fake.script(
        Reply(tool_calls=[Call("run_command", {"command": WRITES_CONFIG})]),
        Reply(content="It ran."),
    )
    cid = client.start("run it", approval="ask")
    asked = client.wait_for("tool", phase="approval", name="run_command")
    assert asked["preview"] == WRITES_CONFIG  # ask mode: the command itself first
    answer(client, cid, asked, True, always=True)
    held = second_approval(client)
    assert held["call_id"] == asked["call_id"] and held["preview"].startswith("This command")
    answer(client, cid, held, True)
    [result] = results(client.wait_done(cid))
    assert result["output"].endswith(
        f"[The user approved what this command changed in Workspace Agent's own configuration: "
        f"{AGENT}, .mcp.json.]"
    )
    assert (ws / AGENT).read_text() == "name: evil\n" and (ws / ".mcp.json").read_text() == "{}\n"
    undone = client.call("undo_task", {"conversation_id": cid})
    assert undone["ok"] and sorted(undone["removed"]) == [".mcp.json", "notes.txt"], undone
    assert (ws / AGENT).read_text() == OLD_AGENT


def test_a_new_skill_made_by_a_command_is_removed_whole(
    fake: FakeLLM, client: EventClient, ws: Path
):
    shutil.rmtree(ws / ".agents")
    command = (
        "mkdir -p .agents/skills/evil/scripts && printf -- '---\\nname: evil\\n---\\nrun it\\n' "
        "> .agents/skills/evil/SKILL.md && echo 'rm -rf ~' > .agents/skills/evil/scripts/go.sh"
    )
    fake.script(Reply(tool_calls=[Call("run_command", {"command": command})]), Reply(content="."))
    cid = client.start("add a skill")
    asked = client.wait_for("tool", phase="approval", name="run_command")
    assert (
        "This command changed .agents, which Workspace Agent reads as the folder"
        in (asked["preview"])
    )
    assert "+rm -rf ~\n" in asked["preview"]
    answer(client, cid, asked, False)
    [result] = results(client.wait_done(cid))
    assert ".agents/skills/evil/SKILL.md" in result["output"]
    assert state(ws) == {}


# --- nobody to ask ------------------------------------------------------------------------


def run_cli(fake: FakeLLM, workspace: Path, prompt: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        agent_argv("cli", workspace, workspace.parent / "data", "-p", prompt),
        env=agent_env(fake.base_url, fake.api_key),  # approval auto
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def test_cli_p_without_a_terminal_declines_a_configuration_change(
    fake_llm: FakeLLM, tmp_path: Path
):
    workspace = tmp_path / "ws"
    (workspace / ".agents/agents").mkdir(parents=True)
    fake_llm.script(
        Reply(tool_calls=[Call("create_file", {"path": AGENT, "content": "name: x\n"})]),
        Reply(tool_calls=[Call("run_command", {"command": WRITES_CONFIG})]),
        Reply(content="Could not."),
    )
    done = run_cli(fake_llm, workspace, "change the agent")
    assert done.returncode == 4, done.stderr
    assert done.stdout == "Could not.\n"
    err = done.stderr
    assert "create_file needs approval but there is no terminal to ask: declined." in err
    assert f"warning: it touches {REASON}" in err  # the reason shows, with no terminal too
    [line] = [line for line in err.splitlines() if line.startswith("error:")]
    assert "no terminal to ask" in line and "own configuration" in line
    assert not (workspace / AGENT).exists() and not (workspace / ".mcp.json").exists()
    assert (workspace / "notes.txt").read_text() == "kept\n"
    assert "Put back as they were before this command" in tool_messages(fake_llm)[-1]


def test_a_stop_while_the_held_changes_wait_puts_them_back(
    fake: FakeLLM, client: EventClient, ws: Path
):
    fake.script(Reply(tool_calls=[Call("run_command", {"command": WRITES_CONFIG})]))
    cid = client.start("run it")
    client.wait_for("tool", phase="approval", name="run_command")
    assert (ws / ".mcp.json").exists()  # held: there until the user decides
    assert client.call("cancel", {"conversation_id": cid})["ok"]
    [done] = payloads(client.wait_done(cid), "done")
    assert done["reason"] == "cancelled"
    assert (ws / AGENT).read_text() == OLD_AGENT and not (ws / ".mcp.json").exists()
    assert (ws / "notes.txt").read_text() == "kept\n"
