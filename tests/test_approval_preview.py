"""Approval previews: commands as text, overwriting writes as the unified diff they would make."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from core.approval import planned_change, preview
from modules.tools.catalogue import build_registry
from modules.workspace.paths import Workspace
from tests.fake_llm import Call, FakeLLM, Reply
from tests.kit.terminal import make_terminal, run_in_thread


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    (tmp_path / "app.py").write_text("import os\n\nprint('hello')\n")
    return Workspace(tmp_path)


def shown_for(name: str, arguments: dict[str, Any], ws: Workspace) -> str:
    """The approval preview of a call as the loop computes it."""
    tool, args = build_registry().parse_arguments(name, json.dumps(arguments))
    return preview(args.model_dump(), planned_change(tool, args, ws))[0]


def test_create_file_overwrite_is_a_diff(ws: Workspace) -> None:
    shown = shown_for("create_file", {"path": "app.py", "content": "print('bye')\n"}, ws)
    assert shown == (
        "--- a/app.py\n+++ b/app.py\n@@ -1,3 +1 @@\n-import os\n-\n-print('hello')\n+print('bye')\n"
    )


def test_modify_file_replace_is_a_diff(ws: Workspace) -> None:
    arguments = {
        "path": "app.py",
        "operation": "replace",
        "old_text": "'hello'",
        "new_text": "'hi'",
    }
    shown = shown_for("modify_file", arguments, ws)
    assert shown.startswith("--- a/app.py\n+++ b/app.py\n")
    assert shown.endswith(" import os\n \n-print('hello')\n+print('hi')\n")


def test_modify_file_clear_is_a_diff(ws: Workspace) -> None:
    shown = shown_for("modify_file", {"path": "app.py", "operation": "clear"}, ws)
    assert shown.endswith("@@ -1,3 +0,0 @@\n-import os\n-\n-print('hello')\n")


def test_commands_and_unknowable_writes_keep_the_old_preview(ws: Workspace) -> None:
    assert shown_for("run_command", {"command": "ls -la"}, ws) == "ls -la"
    assert shown_for("run_python", {"code": "print(1)"}, ws) == "print(1)"
    missing = {"path": "app.py", "operation": "replace", "old_text": "nowhere", "new_text": "x"}
    assert shown_for("modify_file", missing, ws).startswith("path: app.py\noperation: replace")
    (ws.root / "blob.bin").write_bytes(b"\x00\x01binary")
    shown = shown_for("create_file", {"path": "blob.bin", "content": "text"}, ws)
    assert shown == "(replaces blob.bin, which is binary or too large to show)"
    renamed = shown_for("rename_file", {"old_path": "app.py", "new_path": "b.py"}, ws)
    assert renamed == "old_path: app.py\nnew_path: b.py"  # deletions: test_approval_choices.py


def test_the_agent_loop_sends_the_diff(fake_llm: FakeLLM, tmp_path: Path) -> None:
    terminal = make_terminal(fake_llm, tmp_path, approval="ask")
    (tmp_path / "ws").mkdir(exist_ok=True)
    (tmp_path / "ws" / "a.txt").write_text("old\n")
    fake_llm.script(
        Reply(tool_calls=[Call("create_file", {"path": "a.txt", "content": "new\n"})]),
        Reply(content="ok"),
    )
    thread = run_in_thread(terminal, "overwrite")
    request = terminal.wait_for("tool", phase="approval", name="create_file")
    assert request["preview"] == "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-old\n+new\n"
    terminal.approve(request["call_id"], True)
    thread.join(10)
    assert (tmp_path / "ws" / "a.txt").read_text() == "new\n"
