"""The editor's ops on a real server over Socket.IO: open_file gives the text and its version,
save_file writes it atomically over that version only, a newer file is a conflict that keeps
both sides, binary / large / non-UTF-8 files are read-only, a link out of the workspace is
refused, the agent's own configuration asks first, and undoing a task keeps the user's save."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from modules.workspace.editor_files import EDITOR_LIMIT_BYTES
from tests.fake_llm import Call, Reply
from tests.kit.browser import Served
from tests.kit.clients import EventClient, connected
from tests.kit.settings import TOKEN
from tests.kit.waits import wait_until
from workspace_client import Client, WorkspaceError

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.server(
        env={"AGENT_APPROVAL": "auto"},
        files={
            "notes.txt": "first\n",
            "crlf.txt": "one\r\ntwo\r\n",
            "blob.bin": b"\x00\x01\x02binary",
            "latin.txt": b"caf\xe9\n",
            "big.txt": "x" * (EDITOR_LIMIT_BYTES + 10),
        },
    ),
]


@pytest.fixture
def client(served: Served) -> Iterator[EventClient]:
    with connected(served[0].url) as connection:
        yield connection


def version(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def opened(client: EventClient, path: str) -> dict[str, Any]:
    ack = client.call("open_file", {"path": path})
    assert ack["ok"], ack
    return dict(ack["file"])


def test_open_edit_save_writes_the_bytes_and_gives_the_new_version(
    client: EventClient, served: Served
) -> None:
    workspace = served[2]
    file = opened(client, "notes.txt")
    assert (file["content"], file["read_only"]) == ("first\n", None)
    assert file["version"] == version(b"first\n")
    ack = client.call(
        "save_file", {"path": "notes.txt", "content": "second\n", "base_version": file["version"]}
    )
    assert ack["ok"], ack
    assert ack["file"]["version"] == version(b"second\n")
    assert (workspace / "notes.txt").read_bytes() == b"second\n"
    client.wait_until(
        lambda _: any(
            (change["event"], change["path"]) == ("modified", "notes.txt")
            for event in client.named("file_tree")
            for change in event["changes"]
        ),
        what="the tree told of the save",
    )
    assert not [p.name for p in workspace.iterdir() if p.name.endswith(".tmp")]  # temp + rename


def test_a_save_over_a_newer_file_is_a_conflict_that_changes_nothing(
    client: EventClient, served: Served
) -> None:
    workspace = served[2]
    (workspace / "race.txt").write_text("base\n")
    base = opened(client, "race.txt")["version"]
    (workspace / "race.txt").write_text("the agent's\n")  # written meanwhile
    ack = client.call("save_file", {"path": "race.txt", "content": "mine\n", "base_version": base})
    assert ack["error"]["code"] == "conflict"
    assert ack["current"]["content"] == "the agent's\n"
    assert ack["current"]["version"] == version(b"the agent's\n")
    assert (workspace / "race.txt").read_text() == "the agent's\n"
    theirs = ack["current"]["version"]  # the person chose to save theirs over
    mine = {"path": "race.txt", "content": "mine\n"}
    again = client.call("save_file", {**mine, "base_version": theirs})
    assert again["ok"], again
    assert (workspace / "race.txt").read_text() == "mine\n"


def test_a_deleted_file_is_a_conflict_and_a_new_file_needs_no_version(
    client: EventClient, served: Served
) -> None:
    workspace = served[2]
    (workspace / "gone.txt").write_text("here\n")
    base = opened(client, "gone.txt")["version"]
    (workspace / "gone.txt").unlink()
    ack = client.call("save_file", {"path": "gone.txt", "content": "kept\n", "base_version": base})
    assert (ack["error"]["code"], ack["current"]) == ("conflict", None)
    assert not (workspace / "gone.txt").exists()
    ack = client.call("save_file", {"path": "gone.txt", "content": "kept\n", "base_version": None})
    assert ack["ok"], ack
    assert (workspace / "gone.txt").read_text() == "kept\n"


def test_binary_large_and_non_utf8_files_open_read_only_with_the_reason(
    client: EventClient, served: Served
) -> None:
    blob = opened(client, "blob.bin")
    assert (blob["content"], blob["version"]) == (None, version(b"\x00\x01\x02binary"))
    assert "binary" in blob["read_only"]
    big = opened(client, "big.txt")
    assert big["version"] == version(b"x" * (EDITOR_LIMIT_BYTES + 10))  # all of it, not what shows
    assert "over 2 MB" in big["read_only"]
    assert len(big["content"]) == EDITOR_LIMIT_BYTES and big["size"] == EDITOR_LIMIT_BYTES + 10
    latin = opened(client, "latin.txt")
    assert "not UTF-8" in latin["read_only"]
    # A save naming no version is a conflict over any file there: never a blind overwrite.
    ack = client.call("save_file", {"path": "latin.txt", "content": "cafe\n", "base_version": None})
    assert ack["error"]["code"] == "conflict"
    assert served[2].joinpath("latin.txt").read_bytes() == b"caf\xe9\n"


def test_line_endings_and_a_missing_file(client: EventClient) -> None:
    assert opened(client, "crlf.txt")["content"] == "one\r\ntwo\r\n"
    ack = client.call("open_file", {"path": "nowhere.txt"})
    assert ack["error"]["code"] == "not_found"


def test_a_link_out_of_the_workspace_is_neither_opened_nor_written(
    client: EventClient, served: Served, tmp_path: Path
) -> None:
    workspace = served[2]
    outside = tmp_path / "secret.txt"
    outside.write_text("outside\n")
    (workspace / "escape.txt").symlink_to(outside)
    ack = client.call("open_file", {"path": "escape.txt"})
    assert not ack["ok"] and "outside" in ack["error"]["message"]
    for path in ("escape.txt", "../escape.txt", str(outside)):
        ack = client.call("save_file", {"path": path, "content": "x", "base_version": None})
        assert not ack["ok"], (path, ack)
    assert outside.read_text() == "outside\n"


def test_the_agents_own_configuration_is_saved_only_once_confirmed(
    client: EventClient, served: Served
) -> None:
    workspace = served[2]
    payload = {"path": ".mcp.json", "content": '{"mcpServers": {}}\n', "base_version": None}
    ack = client.call("save_file", payload)
    assert ack["needs_confirmation"] is True and "MCP servers" in ack["error"]["message"]
    assert not (workspace / ".mcp.json").exists()
    ack = client.call("save_file", {**payload, "confirmed": True})
    assert ack["ok"], ack
    assert (workspace / ".mcp.json").read_text() == '{"mcpServers": {}}\n'


def test_undoing_a_task_keeps_the_users_later_save_and_says_so(
    client: EventClient, served: Served
) -> None:
    _, fake, workspace = served
    fake.script(
        Reply(tool_calls=[Call("create_file", {"path": "a.txt", "content": "agent\n"})]),
        Reply(content="Wrote a.txt."),
    )
    cid = client.start("write a.txt")
    client.wait_done(cid)
    assert (workspace / "a.txt").read_text() == "agent\n"
    base = opened(client, "a.txt")["version"]
    ack = client.call("save_file", {"path": "a.txt", "content": "user\n", "base_version": base})
    assert ack["ok"], ack
    [record] = [
        r
        for r in client.call("get_conversation", {"conversation_id": cid})["messages"]
        if r["role"] == "user"
    ]
    undo = client.call("undo_task", {"conversation_id": cid, "message_id": record["id"]})
    assert undo["ok"], undo
    assert [(c["path"], c["reason"]) for c in undo["conflicts"]] == [
        ("a.txt", "changed since the task")
    ]
    assert (workspace / "a.txt").read_text() == "user\n"


def test_the_client_library_opens_and_saves(served: Served) -> None:
    server, _, workspace = served
    (workspace / "lib.txt").write_text("one\n")
    with Client(server.url, TOKEN) as client:
        file = client.open_file("lib.txt")
        saved = client.save_file("lib.txt", "two\n", file["version"])
        assert saved["version"] == version(b"two\n")
        with pytest.raises(WorkspaceError) as stale:
            client.save_file("lib.txt", "three\n", file["version"])
    assert stale.value.code == "conflict"
    assert (workspace / "lib.txt").read_text() == "two\n"


WAIT_FOR_GO = (
    "touch started; for i in $(seq 1200); do [ -e go ] && break; sleep 0.05; done; "
    "echo x > made.txt"
)


def test_a_save_while_the_agents_command_runs_is_not_undone_with_its_task(
    client: EventClient, served: Served
) -> None:
    _, fake, workspace = served
    (workspace / "during.txt").write_text("before\n")
    base = opened(client, "during.txt")["version"]
    fake.script(
        Reply(tool_calls=[Call("run_command", {"command": WAIT_FOR_GO})]), Reply(content="Ran.")
    )
    cid = client.start("run it")
    wait_until(lambda: (workspace / "started").exists(), what="the command to run")
    payload = {"path": "during.txt", "content": "the person's\n", "base_version": base}
    assert client.call("save_file", payload)["ok"]
    (workspace / "go").write_text("")
    client.wait_done(cid)
    assert (workspace / "made.txt").exists()
    [record] = [
        r
        for r in client.call("get_conversation", {"conversation_id": cid})["messages"]
        if r["role"] == "user"
    ]
    undo = client.call("undo_task", {"conversation_id": cid, "message_id": record["id"]})
    assert "made.txt" in undo["removed"] and not (workspace / "made.txt").exists()
    assert (workspace / "during.txt").read_text() == "the person's\n"
