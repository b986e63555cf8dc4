"""The rule of what is Workspace Agent's own configuration (modules/workspace/protected.py), the
hold of a command's changes to it (modules/undo/config_hold.py) on real files and processes,
and where else commands run or nobody can be asked: `main.py mcp`, a Docker sandbox."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import anyio
from mcp import Client

from modules.undo.config_hold import ConfigWatch
from modules.undo.journal import UndoJournal
from modules.workspace.paths import Workspace
from modules.workspace.protected import WORKSPACE_CONFIG, ConfigPath, ProtectedPaths
from tests.fake_llm import Call, FakeLLM, Reply
from tests.kit.clients import connected
from tests.kit.events import payloads
from tests.kit.sandbox_image import SANDBOX_UID, build_test_image, docker_client_or_skip
from tests.kit.server import serving
from tests.kit.tools import state
from tests.test_mcp_server import serve, text

AGENT = ".agents/agents/general.yaml"
WRITES = (
    f"printf 'name: evil\\n' > {AGENT} && printf '{{}}\\n' > .mcp.json && echo kept > notes.txt"
)


def with_agent(tmp_path: Path) -> Path:
    """tmp_path/ws holding the user's general agent."""
    ws = tmp_path / "ws"
    (ws / AGENT).parent.mkdir(parents=True)
    (ws / AGENT).write_text("name: general\n")
    return ws


# --- the rule ----------------------------------------------------------------------------


def test_the_workspace_configuration_and_what_is_not_part_of_it(tmp_path: Path):
    protected = ProtectedPaths(tmp_path / "ws")
    assert protected.tops() == [".agents", ".mcp.json"]
    assert protected.reason(AGENT) == (
        f"{AGENT}, which Workspace Agent reads as an agent definition or its prompt file: it "
        "can change what the agent is told and may do"
    )
    assert protected.reason(".agents/skills/s/scripts/go.sh") == (
        ".agents/skills/s/scripts/go.sh, which Workspace Agent reads as a skill: it can change "
        "the instructions the agent follows and the scripts it runs"
    )
    for rel in (".agents", ".agents/notes.md", ".agents/skills/s/SKILL.md", ".mcp.json", ""):
        assert protected.reason(rel) is not None, rel  # "" (the root) holds them all
    for rel in (".agents-old/x.yaml", ".mcp.json.bak", "src/.agents/agents/x.yaml", ".gitignore"):
        assert protected.reason(rel) is None, rel


def test_an_entry_added_to_the_list_is_all_a_new_kind_needs(tmp_path: Path):
    ws = tmp_path / "ws"
    (ws / ".git/hooks").mkdir(parents=True)
    hooks = ConfigPath(".git/hooks", "a git hook", "git runs it")
    protected = ProtectedPaths(ws, (*WORKSPACE_CONFIG, hooks))
    assert protected.tops() == [".agents", ".mcp.json", ".git/hooks"]
    assert protected.reason(".git") == (
        ".git, which holds .git/hooks, read by Workspace Agent as a git hook: git runs it"
    )  # deleting or renaming the folder that holds an entry counts too
    assert protected.reason(".git/config") is None
    # a command's change there is held, though the undo journal's own scans skip .git
    with watch_for(tmp_path, protected).around() as watch:
        bash(ws, "printf '#!/bin/sh\\necho evil\\n' > .git/hooks/pre-commit")
        held = watch.changes()
        assert held is not None and held.paths == [".git/hooks/pre-commit"]
        held.decide(False)
    assert list((ws / ".git/hooks").iterdir()) == []


def test_another_case_counts_only_where_it_names_the_same_entry(tmp_path: Path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / ".mcp.json").write_text("{}")
    os.link(ws / ".mcp.json", ws / ".MCP.json")  # one file, two spellings: as on a casefold fs
    (ws / ".agents").mkdir()
    (ws / ".AGENTS").mkdir()  # two folders: Linux tells the spellings apart
    protected = ProtectedPaths(tmp_path / "ws")
    why = protected.reason(".MCP.json")
    assert why is not None and why.startswith(".mcp.json, which Workspace Agent reads as")
    assert protected.reason(".AGENTS/agents/x.yaml") is None


# --- the hold, on real files ---------------------------------------------------------------


def watch_for(tmp_path: Path, protected: ProtectedPaths | None = None) -> ConfigWatch:
    (tmp_path / "ws").mkdir(exist_ok=True)
    journal = UndoJournal(tmp_path / "data", Workspace(tmp_path / "ws"))
    return ConfigWatch(journal, protected or ProtectedPaths(tmp_path / "ws"))


def bash(ws: Path, command: str) -> None:
    subprocess.run(["bash", "-c", command], cwd=ws, check=True)


def test_a_folder_swapped_for_a_link_out_is_put_back_whole(tmp_path: Path):
    ws = with_agent(tmp_path)
    (ws / ".agents/skills/s").mkdir(parents=True)
    (ws / ".agents/skills/s/logo.png").write_bytes(b"\x89PNG\x00" * 10)
    outside = tmp_path / "outside"
    (outside / "agents").mkdir(parents=True)
    (outside / "agents/general.yaml").write_text("name: theirs\n")
    before = state(ws)
    with watch_for(tmp_path).around() as watch:
        bash(ws, "rm -rf .agents && ln -s ../outside .agents && printf '{}' > .mcp.json")
        held = watch.changes()
        assert held is not None
        assert held.paths == [
            ".agents",
            ".agents/agents",
            AGENT,
            ".agents/skills",
            ".agents/skills/s",
            ".agents/skills/s/logo.png",
            ".mcp.json",
        ]
        shown = held.diff()
        assert ".agents: a folder before, a link to ../outside now\n" in shown
        assert ".agents/skills/s/logo.png: a file of 50 bytes before, not readable here (" in shown
        assert "--- /dev/null\n+++ b/.mcp.json\n@@ -0,0 +1 @@\n+{}\n" in shown
        note = held.decide(False)
    assert (
        note.startswith("\n[Put back as they were before this command") and "Could not" not in note
    )
    assert state(ws) == before
    assert (outside / "agents/general.yaml").read_text() == "name: theirs\n"


def test_the_same_bytes_written_again_hold_nothing(tmp_path: Path):
    ws = with_agent(tmp_path)
    with watch_for(tmp_path).around() as watch:
        bash(ws, f"cp {AGENT} copy && cat copy > {AGENT} && touch {AGENT} && rm copy")
        assert watch.changes() is None


# --- nobody to ask: main.py mcp ----------------------------------------------------------


def test_mcp_refuses_a_configuration_change_and_puts_back_a_commands(tmp_path: Path):
    ws = with_agent(tmp_path)

    async def session() -> None:
        async with Client(serve(tmp_path, "--approval", "auto")) as client:
            refused = await client.call_tool("create_file", {"path": AGENT, "content": "x\n"})
            assert refused.is_error
            assert text(refused).startswith(
                f"create_file was not run: it changes {AGENT}, which Workspace Agent reads as "
                "an agent definition"
            )
            assert text(refused).endswith("which cannot be asked over MCP.")
            ran = await client.call_tool("run_command", {"command": WRITES})
            assert not ran.is_error, text(ran)
            assert f"were not approved: {AGENT}, .mcp.json." in text(ran)
            assert text(ran).endswith("which cannot be asked here.]")

    anyio.run(session)
    assert (ws / AGENT).read_text() == "name: general\n" and not (ws / ".mcp.json").exists()
    assert (ws / "notes.txt").read_text() == "kept\n"


# --- commands in Docker --------------------------------------------------------------------


def test_a_docker_commands_changes_to_the_configuration_are_held_too(
    tmp_path: Path, fake_llm: FakeLLM
):
    image = build_test_image(docker_client_or_skip())
    env = {"AGENT_SANDBOX": "docker", "AGENT_DOCKER_IMAGE": image, "AGENT_DOCKER_POOL_SIZE": "1"}
    with (
        serving(tmp_path, fake_llm, env, {AGENT: "name: general\n"}) as server,
        connected(server.url) as client,
    ):
        for folder, dirs, files in os.walk(server.workspace):  # the sandbox user writes it
            for name in (folder, *(os.path.join(folder, n) for n in dirs + files)):
                os.chown(name, SANDBOX_UID, SANDBOX_UID)
        assert client.call("get_status")["sandbox"]["kind"] == "docker"
        fake_llm.script(
            Reply(tool_calls=[Call("run_command", {"command": f"id -u && {WRITES}"})]),
            Reply(content="It ran."),
        )
        cid = client.start("run it")
        asked = client.wait_for("tool", phase="approval", timeout=60)
        assert asked["preview"].startswith(f"This command changed {AGENT}, which")
        ack = client.call(
            "approve", {"conversation_id": cid, "call_id": asked["call_id"], "approved": False}
        )
        assert ack["ok"], ack
        [result] = payloads(client.wait_done(cid, timeout=60), "tool", phase="result")
    assert result["output"].startswith("exit code 0") and f"\n{SANDBOX_UID}\n" in result["output"]
    assert f"were not approved: {AGENT}, .mcp.json." in result["output"]
    ws = server.workspace
    assert (ws / AGENT).read_text() == "name: general\n" and not (ws / ".mcp.json").exists()
    assert (ws / "notes.txt").read_text() == "kept\n"
