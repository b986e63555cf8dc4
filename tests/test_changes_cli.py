"""`/diff` in the terminal, local (`main.py cli`) and on a server (`cli --server`), each a real
process reading its commands from stdin: the conversation's changes since it began, or what
`git diff` shows when the workspace is a git repository."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fake_llm import Call, FakeLLM, Reply
from tests.kit.server import REPO, ServerProcess, agent_argv, agent_env
from tests.kit.settings import TOKEN

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.usefixtures("clean_fake"),
    pytest.mark.server(files={"notes.txt": "line 1\nline 2\nline 3\n"}),
]
EDIT = "sed -i 's/^line 3$/line three/' notes.txt"


def script(fake: FakeLLM) -> None:
    fake.script(Reply(tool_calls=[Call("run_command", {"command": EDIT})]), Reply(content="Done."))


def run(argv: list[str], env: dict[str, str], lines: list[str]) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        argv,
        env=env,
        cwd=REPO,
        input="\n".join([*lines, "/quit"]) + "\n",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done


def test_the_local_diff_shows_the_conversation_s_changes(fake_llm: FakeLLM, tmp_path: Path):
    script(fake_llm)
    workspace, data = tmp_path / "ws", tmp_path / "data"
    workspace.mkdir()
    (workspace / "notes.txt").write_text("line 1\nline 2\nline 3\n")
    env = agent_env(fake_llm.base_url, fake_llm.api_key)
    argv = agent_argv("cli", workspace, data, "--approval", "auto")
    out = run(argv, env, ["/diff", "edit it", "/diff"]).stdout
    assert "no conversation yet" in out
    shown = out[out.index("Done.") :]
    assert "--- notes.txt: modified" in shown and "-line 3\n+line three" in shown


@pytest.mark.skipif(shutil.which("git") is None, reason="the git program is missing")
def test_the_remote_diff_is_git_s_in_a_repository(server: ServerProcess, fake: FakeLLM):
    ws = server.workspace
    for args in (["init", "-q", "-b", "main"], ["add", "-A"]):
        subprocess.run(["git", *args], cwd=ws, check=True)
    commit = ["git", "-c", "user.name=T", "-c", "user.email=t@t", "commit", "-q", "-m", "start"]
    subprocess.run(commit, cwd=ws, check=True)
    script(fake)
    env = {**agent_env(fake.base_url, fake.api_key), "AGENT_WEB_TOKEN": TOKEN}
    argv = [sys.executable, str(REPO / "main.py"), "cli", "--server", server.url]
    done = run(
        [*argv, "--approval", "auto"], env, ["edit it", "/diff", "/diff conversation", "/diff x"]
    )
    out = done.stdout[done.stdout.index("Done.") :]
    git_diff = subprocess.run(["git", "diff"], cwd=ws, capture_output=True, text=True).stdout
    assert "git: branch main\n--- not staged\n" + git_diff.rstrip() in out
    assert "--- notes.txt: modified" in out  # /diff conversation: from the undo journal
    assert "usage: /diff [conversation]" in done.stderr
