"""A data folder whose disk is full, on a real 2 MiB tmpfs: a message it refuses is not kept and
the answer says why in words (`disk_full`, docs/protocol.md §4.4); a task whose writes find it
full ends with that error; the server keeps serving and stops as usual, and freeing space lets
the next message through. The web server and `cli -p`, as real processes."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from history import conversation as conversation_module
from history.conversation import META_SAVE_INTERVAL
from history.store import ConversationStore
from tests.fake_llm import FakeLLM, Reply, long_answer
from tests.kit.browser import open_page, send
from tests.kit.clients import connected
from tests.kit.events import tokens
from tests.kit.server import ServerProcess, agent_argv, agent_env

pytestmark = pytest.mark.e2e

TMPFS_SIZE = "2m"


@pytest.fixture
def data(tmp_path: Path) -> Iterator[Path]:
    """A data folder on a tmpfs of its own (2 MiB), unmounted after the test."""
    folder = tmp_path / "data"
    folder.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    mount = ["mount", "-t", "tmpfs", "-o", f"size={TMPFS_SIZE}", "tmpfs", str(folder)]
    mounted = subprocess.run(mount, capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"this machine cannot mount a tmpfs: {mounted.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "--lazy", str(folder)], check=True)


def fill(folder: Path) -> Path:
    """Write a file in `folder` until its disk refuses more; returns it (unlink it to free)."""
    filler = folder / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while True:
            os.write(fd, b"x" * 4096)
    except OSError as exc:
        assert exc.errno == errno.ENOSPC, exc
    finally:
        os.close(fd)
    return filler


def stored(data: Path, cid: str) -> list[tuple[str, str]]:
    """messages.jsonl as it is on disk: (role, content) per line."""
    lines = (data / "conversations" / cid / "messages.jsonl").read_text().splitlines()
    return [(r["role"], r["content"]) for r in map(json.loads, lines)]


def conversation_ids(data: Path) -> list[str]:
    return sorted(path.name for path in (data / "conversations").iterdir())


def assert_disk_full(error: dict[str, Any], data: Path) -> None:
    assert error["code"] == "disk_full", error
    assert f"The disk holding {data} is full" in error["message"], error
    assert "Free some space there" in error["message"]


def test_a_record_is_appended_whole_or_not_at_all(
    data: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(conversation_module, "META_SAVE_INTERVAL", 0.0)  # every append saves
    conversation = ConversationStore(data).create(title="full")
    conversation.append("user", "kept")
    messages = data / "conversations" / conversation.id / "messages.jsonl"
    before = messages.read_bytes()
    filler = fill(data)
    with pytest.raises(OSError) as refused:
        conversation.append("assistant", "w" * 12_000)  # more than the page left has room for
    assert refused.value.errno == errno.ENOSPC
    assert messages.read_bytes() == before  # the part written is cut off again
    short = conversation.append("assistant", "short")  # fits; meta.json's save does not
    assert messages.read_bytes().startswith(before) and len(conversation) == 2
    on_disk = json.loads(messages.with_name("meta.json").read_text())
    assert on_disk["updated_at"] < short["created_at"]  # not saved, and append did not raise
    with pytest.raises(OSError):
        ConversationStore(data).create(title="no room")
    assert os.listdir(data / "conversations") == [conversation.id]  # no empty folder left
    filler.unlink()
    conversation.flush()  # the save that failed is made now
    reloaded = ConversationStore(data).get(conversation.id)
    assert [r["content"] for r in reloaded.records] == ["kept", "short"]
    assert reloaded.meta["updated_at"] == short["created_at"]


def test_a_message_refused_for_a_full_disk_is_not_kept(
    fake_llm: FakeLLM, tmp_path: Path, data: Path
) -> None:
    fake_llm.script(Reply(content="First answer."), Reply(content="Sent again."))
    server = ServerProcess(
        tmp_path / "ws", data, base_url=fake_llm.base_url, api_key=fake_llm.api_key
    )
    try:
        with connected(server.start().url) as client:
            cid = client.start("first")
            client.wait_done(cid)
            filler = fill(data)
            # Its next message at once, and once meta.json's save is due again; a new one.
            for conversation_id, pause in ((cid, 0.0), (cid, META_SAVE_INTERVAL), (None, 0.0)):
                time.sleep(pause)
                payload = {"conversation_id": conversation_id, "text": "refused"}
                ack = client.call("send_message", payload)
                assert ack["ok"] is False
                assert_disk_full(ack["error"], data)
                assert "Your message was not sent, and nothing of it was kept." in str(ack)
            memory = client.call("set_memory", {"scope": "main", "content": "note"})
            assert memory["error"]["code"] == "disk_full", memory
            assert client.call("get_status")["ok"] is True  # it keeps serving
            assert client.call("list_conversations")["running"] == []
        assert server.stop() == 0  # and stops as usual, the disk still full
        assert stored(data, cid) == [("user", "first"), ("assistant", "First answer.")]
        assert conversation_ids(data) == [cid]  # no conversation made for the refused one
        filler.unlink()
        with connected(server.start().url) as client:
            got = client.call("get_conversation", {"conversation_id": cid})
            assert [m["content"] for m in got["messages"]] == ["first", "First answer."]
            client.start("sent again", cid)
            assert client.wait_done(cid)[-1].payload["reason"] == "complete"
    finally:
        server.stop()
    assert stored(data, cid)[2:] == [("user", "sent again"), ("assistant", "Sent again.")]


def test_a_task_whose_writes_find_the_disk_full_ends_with_disk_full(
    fake_llm: FakeLLM, tmp_path: Path, data: Path
) -> None:
    answer = long_answer("w", 2_000)  # its record needs more than the page messages.jsonl has left
    fake_llm.script(Reply(content=answer, chunk_size=200, delay=0.03), Reply(content="Room again."))
    server = ServerProcess(
        tmp_path / "ws", data, base_url=fake_llm.base_url, api_key=fake_llm.api_key
    )
    try:
        with connected(server.start().url) as client:
            cid = client.start("write a lot")
            client.wait_until(lambda _: len(tokens(client.of(cid))) >= 3, 10, "first tokens")
            filler = fill(data)
            events = client.wait_done(cid)
            errors = [e.payload for e in events if e.name == "error"]
            assert len(errors) == 1, errors
            assert_disk_full(errors[0], data)
            assert "The task stopped there" in errors[0]["message"]
            assert events[-1].payload["reason"] == "error"
            filler.unlink()
            client.start("again", cid)
            assert client.wait_done(cid, count=2)[-1].payload["reason"] == "complete"
    finally:
        server.stop()
    assert stored(data, cid) == [
        ("user", "write a lot"),
        ("user", "again"),
        ("assistant", "Room again."),
    ]


@pytest.mark.browser
def test_the_page_says_the_disk_is_full_and_keeps_the_typed_text(
    browser: Any, fake_llm: FakeLLM, tmp_path: Path, data: Path
) -> None:
    fake_llm.script(Reply(content="First answer."), Reply(content="Sent again."))
    with ServerProcess(
        tmp_path / "ws", data, base_url=fake_llm.base_url, api_key=fake_llm.api_key
    ) as server:
        served = (server, fake_llm, server.workspace)
        with open_page(browser, served, ready=["#reconnect-banner[data-state]"]) as page:
            send(page, "first")
            page.wait_for_selector(".assistant-message:has-text('First answer.')")
            filler = fill(data)
            send(page, "refused")
            error = page.wait_for_selector("#composer-error:not([hidden])")
            assert f"The disk holding {data} is full" in error.inner_text()
            assert page.input_value("#message-input") == "refused"
            assert page.locator(".user-message").count() == 1
            filler.unlink()
            page.press("#message-input", "Enter")
            page.wait_for_selector(".assistant-message:has-text('Sent again.')")
            assert page.locator("#composer-error").is_hidden()


def run_cli(
    fake: FakeLLM, workspace: Path, data: Path, *extra: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        agent_argv("cli", workspace, data, *extra),
        env=agent_env(fake.base_url, fake.api_key),
        cwd=workspace,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_cli_says_the_disk_is_full_and_keeps_nothing(
    fake_llm: FakeLLM, tmp_path: Path, data: Path
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    fake_llm.script(Reply(content="First answer."), Reply(content="Sent again."))
    first = run_cli(fake_llm, workspace, data, "-p", "first")
    assert first.returncode == 0, first.stderr
    cid = first.stderr.split("conversation: ")[1].split()[0]
    filler = fill(data)
    for extra in (("--conversation", cid), ()):
        refused = run_cli(fake_llm, workspace, data, "-p", "refused", *extra)
        assert refused.returncode == 1, refused.stderr
        assert f"error: disk_full: The disk holding {data} is full" in refused.stderr
        assert "Traceback" not in refused.stderr and refused.stdout == ""
    assert stored(data, cid) == [("user", "first"), ("assistant", "First answer.")]
    assert conversation_ids(data) == [cid]
    filler.unlink()
    again = run_cli(fake_llm, workspace, data, "-p", "sent again", "--conversation", cid)
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == "Sent again."
