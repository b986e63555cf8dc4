"""The changes op (from the undo journals: each task's files with a diff, and the sum since the
conversation began) and the git ops (status, diff, stage, unstage, commit) over Socket.IO."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.fake_llm import Call, FakeLLM, Reply
from tests.kit.clients import InProcessClient, Web

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="the git program is missing")
LINES = "".join(f"line {n}\n" for n in range(1, 21))


def git(ws: Path, *args: str) -> str:
    """git as the user runs it in the workspace (the tests' own repository, nothing planted)."""
    done = subprocess.run(["git", *args], cwd=ws, capture_output=True, text=True, check=True)
    return done.stdout


def init_repository(ws: Path) -> None:
    git(ws, "init", "-q", "-b", "main")
    git(ws, "add", "-A")
    git(ws, "-c", "user.name=T", "-c", "user.email=t@t", "commit", "-q", "-m", "start")


def hunks(diff: str) -> str:
    """A file's diff from its first hunk: git's headers (`diff --git`, `index`) differ, and git
    names the function a hunk is in after its `@@`."""
    return re.sub(r"^(@@ [^@]* @@).*$", r"\1", diff[diff.index("@@") :], flags=re.M)


def run_task(client: InProcessClient, fake: FakeLLM, command: str, cid: str | None = None) -> str:
    fake.script(Reply(tool_calls=[Call("run_command", {"command": command})]), Reply(content="ok"))
    cid = client.send("change it", cid)
    client.wait_done(cid)
    return cid


@needs_git
def test_each_task_s_diff_matches_git_and_the_sum_runs_from_the_start(
    web: Web, fake_llm: FakeLLM
) -> None:
    ws = web.workspace
    (ws / "notes.txt").write_text(LINES)
    (ws / "gone.txt").write_text("bye\n")
    init_repository(ws)
    client = web.connect()
    cid = run_task(client, fake_llm, "sed -i 's/line 5/line five/' notes.txt && echo new > new.txt")
    git_diff = git(ws, "diff", "--", "notes.txt")
    cid = run_task(
        client, fake_llm, "sed -i 's/line 15/fifteen/' notes.txt && rm gone.txt && "
        "printf 'a\\000b' > blob.bin", cid,
    )  # fmt: skip

    ack = client.call("changes", {"conversation_id": cid})
    assert ack["ok"], ack
    first, second = ack["tasks"]
    by_path = {f["path"]: f for f in first["files"]}
    assert set(by_path) == {"notes.txt", "new.txt"} and not first["undone"]
    assert hunks(by_path["notes.txt"]["diff"]) == hunks(git_diff)
    assert by_path["new.txt"]["status"] == "added" and "+new" in by_path["new.txt"]["diff"]
    later = {f["path"]: f for f in second["files"]}
    assert "-line 15\n+fifteen" in later["notes.txt"]["diff"]
    assert "line five" not in later["notes.txt"]["diff"].split("@@")[1]  # this task's only
    assert later["gone.txt"]["status"] == "deleted" and "-bye" in later["gone.txt"]["diff"]
    assert later["blob.bin"]["note"] == "binary" and later["blob.bin"]["diff"] is None

    since = {f["path"]: f for f in ack["since_start"]}
    assert set(since) == {"notes.txt", "new.txt", "gone.txt", "blob.bin"}
    assert hunks(since["notes.txt"]["diff"]) == hunks(git(ws, "diff", "--", "notes.txt"))

    one = client.call("changes", {"conversation_id": cid, "message_id": second["message_id"]})
    assert [t["message_id"] for t in one["tasks"]] == [second["message_id"]]
    assert one["since_start"] is None


def test_an_undone_task_is_marked_and_leaves_the_sum(web: Web, fake_llm: FakeLLM) -> None:
    (web.workspace / "a.txt").write_text("one\n")
    client = web.connect()
    cid = run_task(client, fake_llm, "echo two >> a.txt")
    assert client.call("undo_task", {"conversation_id": cid})["ok"]
    ack = client.call("changes", {"conversation_id": cid})
    assert [t["undone"] for t in ack["tasks"]] == [True]
    (undone,) = ack["tasks"][0]["files"]  # what it left is not kept: journals keep hashes
    assert undone["path"] == "a.txt" and "not kept" in undone["note"] and undone["diff"] is None
    assert ack["since_start"] == []
    unknown = client.call("changes", {"conversation_id": "nope"})
    assert unknown["error"]["code"] == "not_found"


@needs_git
def test_stage_unstage_and_commit_through_the_ops(web: Web) -> None:
    ws = web.workspace
    client = web.connect()
    assert client.call("git_status") == {"ok": True, "repository": False}
    refused = client.call("git_stage", {"paths": ["x"]})
    assert (
        refused["error"]["code"] == "invalid"
        and "not a git repository" in refused["error"]["message"]
    )
    (ws / "a.txt").write_text("one\n")
    init_repository(ws)
    (ws / "a.txt").write_text("one\ntwo\n")
    (ws / "b.txt").write_text("bee\n")
    status = client.call("git_status")
    assert status["branch"] == "main" and status["repository"]
    assert {f["path"]: f["worktree"] for f in status["files"]} == {"a.txt": "M", "b.txt": "?"}
    diff = client.call("git_diff", {})
    assert diff["diff"] == git(ws, "diff") and not diff["staged"]

    assert client.call("git_stage", {"paths": ["a.txt", "b.txt"]})["ok"]
    staged = client.call("git_diff", {"staged": True})
    assert staged["diff"] == git(ws, "diff", "--cached") and "+bee" in staged["diff"]
    assert client.call("git_unstage", {"paths": ["b.txt"]})["ok"]
    done = client.call("git_commit", {"message": "Add two\n\nBecause."})
    assert done["ok"] and done["summary"] == "Add two", done
    assert git(ws, "log", "-1", "--format=%H %s").split() == [done["commit"], "Add", "two"]
    after = client.call("git_status")
    assert after["head"] == done["commit"]
    assert [(f["path"], f["index"]) for f in after["files"]] == [("b.txt", "?")]
    nothing = client.call("git_commit", {"message": "again"})
    assert "Nothing is staged" in nothing["error"]["message"]


@pytest.mark.parametrize(
    ("event", "payload"),
    [
        ("changes", {}),
        ("changes", {"conversation_id": ["x"]}),
        ("git_diff", {"staged": [1]}),
        ("git_stage", {"paths": []}),
        ("git_unstage", {"paths": ["a", ""]}),
        ("git_commit", {"message": ""}),
        ("git_commit", {"message": "x" * 10_001}),
    ],
)
def test_bad_payloads_are_refused(web: Web, event: str, payload: dict) -> None:
    ack = web.connect().call(event, payload)
    assert ack["ok"] is False and ack["error"]["code"] == "bad_request", ack
