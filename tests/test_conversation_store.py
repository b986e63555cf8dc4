"""The conversation store's messages on disk: roundtrips, crashes, branches, scale, threads."""

from __future__ import annotations

import json
import threading
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from history.conversation import MessageNotFound
from history.store import ConversationStore
from protocol.records import MessageRecord, ToolCallRecord


def _lines(store_dir: Path, conversation_id: str) -> list[bytes]:
    path = store_dir / "conversations" / conversation_id / "messages.jsonl"
    return path.read_bytes().split(b"\n")


def _messages_file(data_dir: Path, conversation_id: str) -> Path:
    return data_dir / "conversations" / conversation_id / "messages.jsonl"


def test_roundtrip_survives_a_restart(tmp_path: Path) -> None:
    store = ConversationStore(tmp_path)
    conv = store.create(meta={"mode": "fast"})
    user = conv.append("user", "Fix the failing test in app.py please")
    call: ToolCallRecord = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "read_file", "arguments": '{"path": "app.py"}'},
    }
    assistant = conv.append("assistant", "", reasoning_content="Look first.", tool_calls=[call])
    untyped: Any = conv  # called as untyped code could: a field no type names is kept too
    tool = untyped.append(
        "tool",
        "print('hi')",
        tool_call_id="call_1",
        name="read_file",
        meta={"ok": True},
        custom_field="kept",
    )
    final = conv.append("assistant", "Done. 修好了 ✓")

    reloaded = ConversationStore(tmp_path).get(conv.id)
    assert reloaded.records == [user, assistant, tool, final]
    assert reloaded.leaf_id == final["id"]
    assert [r["id"] for r in reloaded.path()] == [
        user["id"],
        assistant["id"],
        tool["id"],
        final["id"],
    ]
    assert reloaded.meta["meta"] == {"mode": "fast"}
    assert reloaded.meta["title"] == "Fix the failing test in app.py please"
    assert reloaded.meta["updated_at"] == final["created_at"]
    assert tool["custom_field"] == "kept" and tool["meta"] == {"ok": True}


def test_record_has_every_protocol_field(tmp_path: Path) -> None:
    conv = ConversationStore(tmp_path).create(title="t")
    root = conv.append("user", "hello")
    child = conv.append("assistant", "hi")
    for key in (
        "id",
        "conversation_id",
        "parent_id",
        "depth",
        "version",
        "role",
        "content",
        "created_at",
        "meta",
    ):
        assert key in root
    assert (root["parent_id"], root["depth"], root["version"]) == (None, 0, 1)
    assert (child["parent_id"], child["depth"], child["version"]) == (root["id"], 1, 1)
    assert root["conversation_id"] == conv.id
    assert "reasoning_content" not in child and "tool_calls" not in child
    offset = datetime.fromisoformat(root["created_at"]).utcoffset()
    assert offset is not None and offset.total_seconds() == 0
    assert conv.meta["title"] == "t"  # an explicit title is not replaced by the first message
    written = json.loads(_lines(tmp_path, conv.id)[0])
    assert written == root


def test_torn_last_line_is_ignored_and_next_append_is_clean(tmp_path: Path) -> None:
    store = ConversationStore(tmp_path)
    conv = store.create()
    first = conv.append("user", "one")
    second = conv.append("assistant", "two")
    path = _messages_file(tmp_path, conv.id)
    with path.open("ab") as handle:  # a crash in the middle of the third record
        handle.write(b'{"id":"abc","conversation_id":"x","role":"us')

    reloaded = ConversationStore(tmp_path).get(conv.id)
    assert [r["id"] for r in reloaded.records] == [first["id"], second["id"]]
    third = reloaded.append("user", "three")
    fourth = reloaded.append("assistant", "four")

    again = ConversationStore(tmp_path).get(conv.id)
    assert [r["id"] for r in again.records] == [
        first["id"],
        second["id"],
        third["id"],
        fourth["id"],
    ]
    assert third["parent_id"] == second["id"]
    assert path.read_bytes().endswith(b"\n")


def test_line_cut_inside_a_multibyte_character(tmp_path: Path) -> None:
    conv = ConversationStore(tmp_path).create()
    kept = conv.append("user", "first")
    conv.append("assistant", "答案是四十二")
    path = _messages_file(tmp_path, conv.id)
    data = path.read_bytes()
    cut = data.rindex("二".encode()) + 1  # inside the 3-byte UTF-8 sequence
    path.write_bytes(data[:cut])

    reloaded = ConversationStore(tmp_path).get(conv.id)
    assert [r["id"] for r in reloaded.records] == [kept["id"]]
    after = reloaded.append("assistant", "再来一次")
    assert [r["id"] for r in ConversationStore(tmp_path).get(conv.id).records] == [
        kept["id"],
        after["id"],
    ]


def test_complete_last_line_without_newline_is_kept(tmp_path: Path) -> None:
    conv = ConversationStore(tmp_path).create()
    first = conv.append("user", "a")
    path = _messages_file(tmp_path, conv.id)
    path.write_bytes(path.read_bytes().rstrip(b"\n"))
    reloaded = ConversationStore(tmp_path).get(conv.id)
    second = reloaded.append("assistant", "b")
    assert ConversationStore(tmp_path).get(conv.id).records == [first, second]


def test_branches_have_versions_and_paths_follow_the_leaf(tmp_path: Path) -> None:
    conv = ConversationStore(tmp_path).create()
    u1 = conv.append("user", "hi")
    a1 = conv.append("assistant", "hello")
    u2 = conv.append("user", "write a poem")
    a2 = conv.append("assistant", "roses...")
    u2b = conv.append("user", "write a haiku", parent_id=a1["id"])  # edit of u2: a branch
    a2b = conv.append("assistant", "old pond...")

    assert (u2["version"], u2b["version"]) == (1, 2)
    assert u2b["depth"] == u2["depth"] == 2
    assert conv.leaf_id == a2b["id"]
    assert [r["id"] for r in conv.siblings(u2["id"])] == [u2["id"], u2b["id"]]
    assert [r["id"] for r in conv.children(a1["id"])] == [u2["id"], u2b["id"]]
    assert [r["id"] for r in conv.children(None)] == [u1["id"]]
    assert [r["content"] for r in conv.path()] == ["hi", "hello", "write a haiku", "old pond..."]
    assert [r["content"] for r in conv.path(a2["id"])] == [
        "hi",
        "hello",
        "write a poem",
        "roses...",
    ]
    reloaded = ConversationStore(tmp_path).get(conv.id)
    assert [r["id"] for r in reloaded.path(a2["id"])] == [u1["id"], a1["id"], u2["id"], a2["id"]]
    assert reloaded.leaf_id == a2b["id"]

    new_root = conv.append("user", "fresh start", parent_id=None)
    assert (new_root["depth"], new_root["version"]) == (0, 2)
    with pytest.raises(MessageNotFound):
        conv.append("user", "x", parent_id="0123456789abcdef")
    with pytest.raises(MessageNotFound):
        conv.path("nope")


def test_bad_append_arguments_are_refused(tmp_path: Path) -> None:
    conv = ConversationStore(tmp_path).create()
    untyped: Any = conv  # called as untyped code could: with what the types refuse
    with pytest.raises(ValueError):
        untyped.append("robot", "x")
    with pytest.raises(ValueError):
        untyped.append("user", "x", depth=5)
    with pytest.raises(TypeError):
        untyped.append("user", ["not", "text"])
    assert conv.records == []
    chosen = conv.append("assistant", "streamed", id="msg_0123abcd")  # the stream's message id
    assert chosen["id"] == "msg_0123abcd" and "msg_0123abcd" in conv.index
    for bad in ("msg_0123abcd", "../x"):
        with pytest.raises(ValueError):
            conv.append("assistant", "again", id=bad)
    assert len(ConversationStore(tmp_path).get(conv.id).records) == 1


def test_ten_thousand_messages_append_and_reload(tmp_path: Path) -> None:
    store = ConversationStore(tmp_path)
    conv = store.create()
    for i in range(10_000):
        conv.append("user" if i % 2 == 0 else "assistant", f"message {i} " + "x" * 40)
    reloaded = ConversationStore(tmp_path).get(conv.id)  # the speed of both: bench/history.py
    assert len(reloaded.records) == 10_000
    path = reloaded.path()
    assert len(path) == 10_000 and path[-1]["content"].startswith("message 9999 ")
    assert path[-1]["depth"] == 9_999


def _check_file(data_dir: Path, conversation_id: str, expected: int) -> None:
    lines = [line for line in _lines(data_dir, conversation_id) if line]
    assert len(lines) == expected
    for line in lines:
        json.loads(line)  # every line is one whole record


def test_concurrent_appends_keep_lines_whole(tmp_path: Path) -> None:
    store = ConversationStore(tmp_path)
    shared = store.create()
    own = [store.create() for _ in range(4)]
    big = "y" * 70_000  # larger than a pipe buffer or a default write buffer
    barrier = threading.Barrier(8)

    def worker(index: int) -> None:
        barrier.wait()
        for i in range(50):
            shared.append("user", f"{index}-{i}" + (big if i % 10 == 0 else ""))
            if index < 4:
                own[index].append("assistant", f"{index}-{i}")

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    _check_file(tmp_path, shared.id, 400)
    for conv in own:
        _check_file(tmp_path, conv.id, 50)
    reloaded = ConversationStore(tmp_path).get(shared.id)
    path = reloaded.path()
    assert len(path) == 400  # each append hung under the previous leaf: one straight chain
    assert [r["depth"] for r in path] == list(range(400))
    assert sorted(r["content"][:8] for r in path) == sorted(
        r["content"][:8] for r in shared.records
    )


def test_path_matches_a_plain_walk_for_random_trees(tmp_path: Path) -> None:
    import random

    rng = random.Random(5)
    conv = ConversationStore(tmp_path).create()
    ids: list[str] = []
    for _ in range(300):
        parent = rng.choice([*ids, None]) if ids and rng.random() < 0.2 else conv.leaf_id
        ids.append(conv.append("user", "m", parent_id=parent)["id"])
        for leaf in [*rng.sample(ids, min(2, len(ids))), conv.leaf_id]:
            assert leaf is not None
            walk: list[str] = []
            current: MessageRecord | None = conv.get(leaf)
            while current is not None:
                walk.append(current["id"])
                parent_id = current["parent_id"]
                current = conv.get(parent_id) if parent_id else None
            assert [r["id"] for r in conv.path(leaf)] == walk[::-1]
    assert conv.path() is not conv.path(), "callers get their own list"
