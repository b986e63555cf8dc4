"""Starting the demo over: `make demo-reset` by its real command, and the `demo_reset` socket op
of a real server (a running task stopped, conversations and memory gone, the sample back),
refused on a workspace that did not start as the sample."""

from __future__ import annotations

import filecmp
import shutil
import subprocess
from pathlib import Path
from typing import Any

from model.demo_scripts import DEMO_DIR
from tests.kit.clients import connected
from tests.kit.server import ServerProcess
from tests.kit.waits import SLOWNESS

SAMPLE = DEMO_DIR / "workspace"
REPO = DEMO_DIR.parent


def same_as_sample(folder: Path) -> bool:
    compared = filecmp.dircmp(SAMPLE, folder)
    return not (compared.left_only or compared.right_only or compared.diff_files)


def demo_server(workspace: Path, data: Path, pace: str = "0") -> ServerProcess:
    env = {"AGENT_PROVIDER": "demo", "AGENT_DEMO_PACE": pace, "AGENT_APPROVAL": "ask"}
    return ServerProcess(workspace, data, base_url="", api_key="", env=env)


def test_make_demo_reset_puts_the_sample_back_and_forgets_the_data(tmp_path: Path):
    workspace, data = tmp_path / "demo" / "workspace", tmp_path / "demo" / "data"
    shutil.copytree(SAMPLE, workspace)
    (workspace / "calc.py").write_text("changed\n")
    (workspace / "SUMMARY.md").write_text("# old\n")
    (data / "conversations").mkdir(parents=True)
    result = subprocess.run(
        [
            "make",
            "--no-print-directory",
            "demo-reset",
            f"DEMO_WORKSPACE={workspace}",
            f"DEMO_DATA={data}",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60 * SLOWNESS,
    )
    assert result.returncode == 0, result.stderr
    assert same_as_sample(workspace) and not data.exists()
    assert "is the sample again. Run: make demo" in result.stdout


def test_start_over_stops_the_task_and_deletes_conversations_and_memory(tmp_path: Path):
    workspace, data = tmp_path / "ws", tmp_path / "data"
    shutil.copytree(SAMPLE, workspace)
    with demo_server(workspace, data, pace="0.02") as server, connected(server.url) as client:
        assert client.call("get_status")["demo_reset"] is True
        done = client.start("Fix the bug in calc.py", approval="auto")
        client.wait_done(done, 60)
        assert "len(values) - 1" not in (workspace / "calc.py").read_text()
        (workspace / "scratch").mkdir()
        (workspace / "scratch" / "notes.txt").write_text("mine\n")
        (workspace / "link").symlink_to(tmp_path)  # removed, not followed
        assert client.call("set_memory", {"scope": "main", "content": "remember me"})["ok"]

        running = client.start("Fix the bug in calc.py")  # waits for an approval
        client.wait_until(
            lambda events: any(e.payload.get("phase") == "approval" for e in events),
            30,
            "an approval to wait on",
        )
        ack = client.call("demo_reset", {}, timeout=30)
        assert ack == {"ok": True, "deleted": 2}, ack
        events = client.wait_done(running, 30)
        assert events[-1].payload["reason"] == "cancelled"
        deleted = {
            e.payload["id"]
            for e in client.events
            if e.name == "conversation_update" and e.payload.get("deleted")
        }
        assert deleted == {done, running}
        assert client.call("list_conversations")["conversations"] == []
        assert client.call("get_memory")["main"].strip() == ""
        assert same_as_sample(workspace) and tmp_path.exists()
        tree = client.call("get_file_tree")["tree"]
        assert sorted(c["name"] for c in tree["children"]) == sorted(
            p.name for p in SAMPLE.iterdir()
        )

        again = client.start("Fix the bug in calc.py", approval="auto")  # the demo plays anew
        answer = "".join(
            e.payload["text"] for e in client.wait_done(again, 60) if e.name == "token"
        )
        assert "## Fixed" in answer


def test_a_workspace_that_was_not_the_sample_is_never_wiped(tmp_path: Path):
    workspace = tmp_path / "mine"
    workspace.mkdir()
    (workspace / "thesis.md").write_text("years of work\n")
    with demo_server(workspace, tmp_path / "data") as server, connected(server.url) as client:
        assert client.call("get_status")["demo_reset"] is False
        ack: dict[str, Any] = client.call("demo_reset", {})
        assert not ack["ok"] and ack["error"]["code"] == "not_demo"
        assert "make demo" in ack["error"]["message"]
    assert (workspace / "thesis.md").read_text() == "years of work\n"


def test_another_provider_refuses_it(tmp_path: Path):
    workspace = tmp_path / "ws"
    shutil.copytree(SAMPLE, workspace)
    server = ServerProcess(
        workspace, tmp_path / "data", base_url="http://127.0.0.1:9/v1", api_key="k"
    )
    with server, connected(server.url) as client:
        status = client.call("get_status")
        assert status["demo"] is False and status["demo_reset"] is False
        assert client.call("demo_reset", {})["error"]["code"] == "not_demo"
    assert same_as_sample(workspace)
