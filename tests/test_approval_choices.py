"""What a deletion approval shows, and the "always allow" choices: listed and revocable, in the
gate, over Socket.IO and with the terminal's /approval."""

from __future__ import annotations

import io
import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from cli.session import run_command
from cli.terminal import CliTerminal
from core.approval import ApprovalGate, human_size, planned_change, preview
from core.services import build_services
from modules.tools.catalogue import build_registry
from modules.workspace.paths import Workspace
from tests.fake_llm import Call, FakeLLM, Reply
from tests.kit.clients import Web
from tests.kit.settings import make_settings


def delete_preview(ws: Workspace, path: str) -> str:
    tool, args = build_registry().parse_arguments("delete_file", json.dumps({"path": path}))
    return preview(args.model_dump(), planned_change(tool, args, ws))[0]


def test_deleting_a_file_shows_its_size_and_first_lines(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("".join(f"note {n}\n" for n in range(1, 31)))
    shown = delete_preview(Workspace(tmp_path), "notes.txt")
    head, *lines = shown.split("\n")
    assert head == "Delete notes.txt: 231 bytes, 30 lines. The first 20:"
    assert lines[:2] == ["note 1", "note 2"] and lines[19] == "note 20"
    assert lines[20:] == ["… 10 more lines"]
    (tmp_path / "short.txt").write_text("one\ntwo\n")
    assert delete_preview(Workspace(tmp_path), "short.txt") == (
        "Delete short.txt: 8 bytes, 2 lines:\none\ntwo"
    )


def test_deleting_other_things_says_what_they_are(tmp_path: Path) -> None:
    ws = Workspace(tmp_path)
    (tmp_path / "empty.txt").write_text("")
    (tmp_path / "blob.bin").write_bytes(b"\x00" * 3000)
    (tmp_path / "src" / "lib").mkdir(parents=True)
    (tmp_path / "src" / "a.py").write_text("a = 1\n")
    (tmp_path / "src" / "lib" / "b.py").write_text("b = 2\n")
    os.symlink("src/a.py", tmp_path / "link")
    (tmp_path / "bad.txt").write_text("rm -rf /\x1b[2K\n")
    assert delete_preview(ws, "empty.txt") == "Delete empty.txt: an empty file."
    assert delete_preview(ws, "blob.bin") == "Delete blob.bin: 2.9 KB, binary."
    assert delete_preview(ws, "src") == (
        "Delete the folder src and everything in it: 2 files, 1 folder, 12 bytes. "
        "It holds:\na.py\nlib/"
    )
    assert delete_preview(ws, "link") == (
        "Delete the link link → src/a.py (what it points to stays)."
    )
    assert delete_preview(ws, "bad.txt").endswith("rm -rf /⟨ESC⟩[2K")
    assert delete_preview(ws, "missing.txt") == "path: missing.txt"  # the call will fail anyway


def test_human_sizes() -> None:
    assert [human_size(n) for n in (1, 532, 1024, 1536, 5 * 1024**2, 3 * 1024**4)] == [
        "1 byte",
        "532 bytes",
        "1.0 KB",
        "1.5 KB",
        "5.0 MB",
        "3,072.0 GB",
    ]


def test_the_gate_lists_and_revokes_what_was_always_allowed() -> None:
    gate = ApprovalGate()
    tool = build_registry().get("run_command")
    assert tool is not None
    gate.open("c1", "run_command")
    assert gate.answer("c1", True, always=True)
    assert gate.allowed() == ["run_command"]
    assert not gate.needs_approval("ask", tool, None)
    assert gate.revoke("run_command") and not gate.revoke("run_command")
    assert gate.allowed() == [] and gate.needs_approval("ask", tool, None)


@pytest.fixture
def terminal(fake_llm: FakeLLM, tmp_path: Path) -> tuple[CliTerminal, io.StringIO, io.StringIO]:
    settings = make_settings(fake_llm, tmp_path, approval="ask")
    out, err = io.StringIO(), io.StringIO()
    return CliTerminal(build_services(settings), out=out, err=err, stdin=io.StringIO()), out, err


def test_cli_approval_shows_sets_and_revokes(
    terminal: tuple[CliTerminal, io.StringIO, io.StringIO],
) -> None:
    cli, out, err = terminal
    run_command(cli, "/approval")
    assert out.getvalue() == (
        "approval: ask (asks before commands, deletions, renames, overwrites and changes to "
        "Workspace Agent's own configuration)\nalways allowed in this session: none\n"
    )
    cli.gate.always_allowed.update({"run_python", "delete_file"})
    run_command(cli, "/approval auto")
    shown = out.getvalue().splitlines()
    assert shown[2:] == [
        "approval: auto (every tool runs without asking, but changes to Workspace Agent's own "
        "configuration)",
        "always allowed in this session: delete_file, run_python",
        "/approval revoke NAME asks again before one",
    ]
    assert cli.approval == "auto"
    run_command(cli, "/approval revoke run_python")
    assert out.getvalue().endswith("run_python asks again before it runs\n")
    assert cli.gate.allowed() == ["delete_file"]
    run_command(cli, "/approval revoke run_python")
    run_command(cli, "/approval sometimes")
    assert err.getvalue().splitlines() == [
        "run_python is not always allowed (/approval lists them)",
        "usage: /approval auto|ask|read-only",
    ]


def test_socket_lists_and_revokes_always_allowed_tools(
    make_web: Callable[..., Web],
    fake_llm: FakeLLM,
) -> None:
    web = make_web(approval="ask")
    client = web.connect()
    fake_llm.script(
        Reply(tool_calls=[Call("run_command", {"command": "echo hi"})]), Reply(content="ok")
    )
    cid = client.send("run it")
    asked = client.wait_for("tool", phase="approval")
    ack = client.call(
        "approve",
        {"conversation_id": cid, "call_id": asked["call_id"], "approved": True, "always": True},
    )
    assert ack == {"ok": True, "always_allowed": ["run_command"]}
    client.wait_done(cid)
    status = client.call("get_status", {"conversation_id": cid})
    assert status["always_allowed"] == ["run_command"]
    assert "always_allowed" not in client.call("get_status", {})
    revoke = {"conversation_id": cid, "tool": "run_command"}
    assert client.call("revoke_approval", revoke) == {"ok": True, "always_allowed": []}
    again = client.call("revoke_approval", revoke)
    assert again["ok"] is False and again["error"]["code"] == "not_found"
    missing = client.call("get_status", {"conversation_id": "nope"})
    assert missing["ok"] is False and missing["error"]["code"] == "not_found"
