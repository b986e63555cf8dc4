"""A data folder whose disk is full, on a real 2 MiB tmpfs: a record is appended whole or not
at all, and a conversation is created whole or not at all."""

from __future__ import annotations

import errno
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from history import conversation as conversation_module
from history.store import ConversationStore

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
