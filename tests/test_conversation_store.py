"""The conversation store against real files: roundtrips, crashes, branches, scale, threads."""

from __future__ import annotations

import json
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from history.conversation import MessageNotFound
from history.records import MessageRecord, ToolCallRecord
from history.store import ConversationNotFound, ConversationStore


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


def test_title_from_first_user_message_is_trimmed(tmp_path: Path) -> None:
    conv = ConversationStore(tmp_path).create()
    conv.append("user", "  word " * 40)
    title = conv.meta["title"]
    assert title is not None
    assert len(title) <= 60 and title.startswith("word word") and title.endswith("…")
    conv.set_title("Renamed")
    assert ConversationStore(tmp_path).get(conv.id).meta["title"] == "Renamed"


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


def test_meta_json_is_replaced_without_leftovers(tmp_path: Path) -> None:
    store = ConversationStore(tmp_path)
    conv = store.create(title="x")
    for i in range(20):
        conv.append("user", str(i))
    untyped: Any = conv  # called as untyped code could: `seq` is a key no type names
    untyped.update_meta(focus=["a.py"], seq=7)
    untyped.update_meta(seq=8)
    directory = tmp_path / "conversations" / conv.id
    assert sorted(p.name for p in directory.iterdir()) == ["messages.jsonl", "meta.json"]
    on_disk = json.loads((directory / "meta.json").read_text(encoding="utf-8"))
    assert on_disk["meta"] == {"focus": ["a.py"], "seq": 8}
    assert set(on_disk) == {"id", "title", "agent_type", "created_at", "updated_at", "meta"}
    assert on_disk["agent_type"] == "workspace"


def test_list_is_newest_updated_first(tmp_path: Path) -> None:
    store = ConversationStore(tmp_path)
    created = []
    for title in "abc":
        created.append(store.create(title=title))
        time.sleep(0.002)  # timestamps have millisecond resolution
    created[0].append("user", "touch a")
    assert [m["title"] for m in store.list()] == ["a", "c", "b"]
    store.flush()  # the bare `updated_at` bump reaches meta.json with the next save
    listed = ConversationStore(tmp_path).list()
    assert [m["title"] for m in listed] == ["a", "c", "b"]
    assert [m["id"] for m in listed] == [created[0].id, created[2].id, created[1].id]
    assert "messages" not in listed[0]
    assert ConversationStore(tmp_path / "empty").list() == []


@pytest.mark.parametrize("bad", ["../x", "..", "", "a/b", "a\\b", "/etc", "x" * 65, "é"])
def test_invalid_or_unknown_ids_are_rejected(tmp_path: Path, bad: str) -> None:
    store = ConversationStore(tmp_path)
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "meta.json").write_text("{}")  # what "../x" would reach
    with pytest.raises(ConversationNotFound):
        store.get(bad)
    assert not store.exists(bad)


def test_unknown_id_is_a_key_error_with_a_clear_message(tmp_path: Path) -> None:
    store = ConversationStore(tmp_path)
    with pytest.raises(KeyError, match="no conversation 'abc123'"):
        store.get("abc123")
    conv = store.create()
    assert store.exists(conv.id) and store.get(conv.id) is conv
    assert ConversationStore(tmp_path).exists(conv.id)


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


def test_unreadable_meta_json_is_rebuilt_from_the_messages(tmp_path: Path) -> None:
    conv = ConversationStore(tmp_path).create()
    first = conv.append("user", "Rename the module")
    last = conv.append("assistant", "Done")
    meta_path = tmp_path / "conversations" / conv.id / "meta.json"
    meta_path.write_text('{"id": "', encoding="utf-8")  # cut by a crash
    reloaded = ConversationStore(tmp_path).get(conv.id)
    assert reloaded.meta["title"] == "Rename the module"
    assert reloaded.meta["created_at"] == first["created_at"]
    assert reloaded.meta["updated_at"] == last["created_at"]
    assert json.loads(meta_path.read_text(encoding="utf-8"))["id"] == conv.id


def test_updated_at_bumps_are_batched_but_never_lost(tmp_path: Path) -> None:
    store = ConversationStore(tmp_path)
    conv = store.create()
    meta_path = tmp_path / "conversations" / conv.id / "meta.json"
    first = conv.append("user", "title comes from here")  # a title change is written at once
    assert json.loads(meta_path.read_text(encoding="utf-8"))["title"] == "title comes from here"
    last = None
    for i in range(50):
        last = conv.append("assistant", str(i))
    assert last is not None
    assert store.list()[0]["updated_at"] == last["created_at"]
    on_disk = json.loads(meta_path.read_text(encoding="utf-8"))["updated_at"]
    assert first["created_at"] <= on_disk <= last["created_at"]

    restarted = ConversationStore(tmp_path)  # as after a crash: the bump was not saved
    assert restarted.get(conv.id).meta["updated_at"] == last["created_at"]

    store.flush()
    assert json.loads(meta_path.read_text(encoding="utf-8"))["updated_at"] == last["created_at"]
    untyped: Any = conv  # called as untyped code could: `seq` is a key no type names
    untyped.update_meta(seq=3)  # meta changes are written at once
    assert json.loads(meta_path.read_text(encoding="utf-8"))["meta"] == {"seq": 3}


def test_a_stale_copy_keeps_what_another_process_wrote_to_meta(tmp_path: Path) -> None:
    """Two processes on one data dir (scale-out): each saves only the keys it changed on top
    of what is on disk, so neither undoes the other's rename or task ends."""
    first = ConversationStore(tmp_path).create(title="x")
    second = ConversationStore(tmp_path).get(first.id)  # another process's copy
    # Both called as untyped code could: a task end without its usage, a focus of None.
    untyped_first: Any = first
    untyped_second: Any = second
    first.set_title("Renamed")
    first.update_meta(focus=["a.py"])
    untyped_second.update_meta(task_ends={"m1": {"reason": "complete"}}, focus=["b.py"])
    on_disk = json.loads((tmp_path / "conversations" / first.id / "meta.json").read_text())
    assert on_disk["title"] == "Renamed"
    assert on_disk["meta"] == {
        "title_by_user": True,
        "focus": ["b.py"],
        "task_ends": {"m1": {"reason": "complete"}},
    }
    assert second.meta["title"] == "Renamed"  # the saving copy is up to date again
    untyped_first.update_meta(focus=None)
    again = json.loads((tmp_path / "conversations" / first.id / "meta.json").read_text())
    assert again["meta"]["task_ends"] == {"m1": {"reason": "complete"}}


def test_the_list_shows_what_another_process_wrote_to_a_loaded_conversation(
    tmp_path: Path,
) -> None:
    """A conversation this process holds in memory is listed with another process's rename
    (the CLI beside the server, or a cluster), merged with what this one has not saved yet."""
    here = ConversationStore(tmp_path)
    mine = here.create(title="old name")
    untyped: Any = mine  # called as untyped code could: a task end without its usage
    untyped.update_meta(task_ends={"m1": {"reason": "complete"}}, save=False)
    time.sleep(0.002)  # timestamps have millisecond resolution
    ConversationStore(tmp_path).get(mine.id).set_title("New name")  # another process
    renamed_at = json.loads((tmp_path / "conversations" / mine.id / "meta.json").read_text())[
        "updated_at"
    ]
    (listed,) = here.list()
    assert (listed["title"], listed["updated_at"]) == ("New name", renamed_at)
    assert listed["meta"]["title_by_user"] is True
    assert listed["meta"]["task_ends"] == {"m1": {"reason": "complete"}}
    mine.update_meta(focus=["a.py"])  # and this process's next save keeps both
    on_disk = json.loads((tmp_path / "conversations" / mine.id / "meta.json").read_text())
    assert (on_disk["title"], on_disk["meta"]["focus"]) == ("New name", ["a.py"])
    assert on_disk["meta"]["task_ends"] == {"m1": {"reason": "complete"}}
