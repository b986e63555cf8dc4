"""A workspace on a read-only mount (a private mount namespace, as root): the CLI and the web
server warn at start, the page shows it, a tool that writes fails saying the workspace is
read-only (never with a temporary file's name), and no undo is offered for a task that changed
nothing: not in the page, not by the CLI's /undo."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.fake_llm import Call, FakeLLM, Reply
from tests.kit.browser import new_context
from tests.kit.server import ServerProcess, agent_argv, agent_env
from tests.kit.settings import TOKEN
from tests.kit.tty import Tmux, needs_tmux
from tests.kit.waits import SLOWNESS

# Binds the workspace (its first argument) onto itself read-only, then execs the rest.
READ_ONLY = 'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" "$0" && exec "$@"'
WARNING = "is read-only (its file system is mounted read-only)"
WRITE = Call("create_file", {"path": "notes.txt", "content": "hello"})


def _can_mount() -> bool:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True, timeout=10)
    return probe.returncode == 0


pytestmark = pytest.mark.skipif(
    not _can_mount(), reason="needs root and unshare to mount the workspace read-only"
)


def read_only(workspace: Path) -> list[str]:
    return ["unshare", "-m", "sh", "-c", READ_ONLY, str(workspace)]


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "kept.txt").write_text("already here\n")
    return workspace, tmp_path / "data"


def tool_results(fake: FakeLLM) -> list[str]:
    return [
        str(m.get("content"))
        for request in fake.chat_requests
        for m in request.messages
        if isinstance(m, dict) and m.get("role") == "tool"
    ]


@needs_tmux()
def test_the_cli_warns_the_write_says_read_only_and_undo_offers_nothing(
    dirs: tuple[Path, Path], fake_llm: FakeLLM
) -> None:
    workspace, data = dirs
    fake_llm.script(Reply(tool_calls=[WRITE]), Reply(content="I could not write it."))
    env = agent_env(fake_llm.base_url, fake_llm.api_key)
    done = subprocess.run(
        read_only(workspace) + agent_argv("cli", workspace, data, "--json", "-p", "write notes"),
        env=env,
        capture_output=True,
        text=True,
        timeout=60 * SLOWNESS,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith(f"warning: the workspace {workspace} {WARNING}"), done.stderr
    [result] = tool_results(fake_llm)
    assert "the workspace is read-only (a read-only file system): notes.txt" in result
    assert ".tmp" not in result and "Errno" not in result
    conversation = next(
        event["conversation_id"] for line in done.stdout.splitlines() if (event := json.loads(line))
    )

    argv = agent_argv("cli", workspace, data, "--conversation", conversation)
    with Tmux(argv, env=env, cwd=workspace.parent) as term:
        term.wait_for("›")
        term.type("/undo")
        screen = term.wait_for("Nothing to undo")
        assert "restored 0" not in screen and "Undo it?" not in screen
    assert not (workspace / "notes.txt").exists()


def test_the_page_shows_the_warning_and_offers_no_undo(
    dirs: tuple[Path, Path], fake_llm: FakeLLM, browser: Any
) -> None:
    workspace, data = dirs
    server = ServerProcess(
        workspace,
        data,
        base_url=fake_llm.base_url,
        api_key=fake_llm.api_key,
        wrap=read_only(workspace),
    )
    with server:
        assert f"warning: the workspace {workspace} {WARNING}" in server.stderr
        status = requests.get(
            f"{server.url}/api/status", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10
        )
        assert WARNING in status.json()["workspace_warning"]

        page = new_context(browser).new_page()
        page.goto(f"{server.url}/?token={TOKEN}")
        warning = page.wait_for_selector("[data-testid=workspace-warning]")
        assert warning is not None and WARNING in warning.inner_text()
        fake_llm.script(Reply(tool_calls=[WRITE]), Reply(content="I could not write it."))
        page.fill("#message-input", "write notes")
        page.press("#message-input", "Enter")
        page.wait_for_selector(".assistant-message:has-text('I could not write it.')")
        page.wait_for_selector('.task-end[data-reason="complete"]', state="attached")
        failed = '.tool-card[data-tool="create_file"]:has-text("the workspace is read-only")'
        page.wait_for_selector(failed, state="attached")
        assert ".tmp" not in (page.locator(failed).text_content() or "")
        page.reload()  # what the server lists as undoable, read again
        page.wait_for_selector(".assistant-message:has-text('I could not write it.')")
        assert page.locator("[data-testid=undo-task]").count() == 0
        page.context.close()
