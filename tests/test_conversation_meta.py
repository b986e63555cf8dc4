"""The conversation store's meta.json and listing: titles, ids, crashes, and other processes."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from history.store import ConversationNotFound, ConversationStore
from utils.errors import NotFound


def test_title_from_first_user_message_is_trimmed(tmp_path: Path) -> None:
    conv = ConversationStore(tmp_path).create()
    conv.append("user", "  word " * 40)
    title = conv.meta["title"]
    assert title is not None
    assert len(title) <= 60 and title.startswith("word word") and title.endswith("…")
    conv.set_title("Renamed")
    assert ConversationStore(tmp_path).get(conv.id).meta["title"] == "Renamed"


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


def test_unknown_id_is_not_found_with_a_clear_message(tmp_path: Path) -> None:
    store = ConversationStore(tmp_path)
    with pytest.raises(NotFound, match="no conversation 'abc123'") as caught:
        store.get("abc123")
    assert caught.value.code == "not_found" and str(caught.value) == "no conversation 'abc123'"
    conv = store.create()
    assert store.exists(conv.id) and store.get(conv.id) is conv
    assert ConversationStore(tmp_path).exists(conv.id)


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
