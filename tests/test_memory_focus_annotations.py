"""Memory, focus files and annotations: stores and their tools."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from modules.results import ToolError
from modules.tools.focus import FocusFiles
from modules.tools.memory import MemoryStore
from modules.tools.tool_context import ToolContext
from modules.workspace.annotations import AnnotationStore
from tests.kit.tools import call


def test_annotations_persist_move_drop_prune(tmp_path: Path) -> None:
    store = AnnotationStore(tmp_path)
    store.set("src", "sources")
    store.set("src/a.py", "module a")
    store.set("src/b.py", "module b")
    store.set("srcx.py", "not under src")
    store.move("src", "lib")
    assert store.all() == {
        "lib": "sources",
        "lib/a.py": "module a",
        "lib/b.py": "module b",
        "srcx.py": "not under src",
    }
    store.drop("lib/a.py")
    assert store.get("lib/a.py") is None
    assert AnnotationStore(tmp_path).all() == store.all()
    assert store.prune({"lib", "srcx.py"}) == 1
    store.drop("lib")
    store.set("srcx.py", "")
    assert AnnotationStore(tmp_path).all() == {}
    assert json.loads((tmp_path / "annotations.json").read_text()) == {}


def test_annotations_survive_a_corrupt_file_and_threads(tmp_path: Path) -> None:
    (tmp_path / "annotations.json").write_text("{not json")
    store = AnnotationStore(tmp_path)
    assert store.all() == {}
    threads = [threading.Thread(target=store.set, args=(f"f{i}", f"note {i}")) for i in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(AnnotationStore(tmp_path).all()) == 20


def test_focus_files_limit_move_drop() -> None:
    focus = FocusFiles(["a", "b"], limit=3)
    assert focus.add("c") and not focus.add("c")
    with pytest.raises(ToolError, match=r"Focus is full \(3 files: a, b, c\)"):
        focus.add("d")
    focus.move("b", "dir/b")
    focus.drop("a")
    assert focus.paths() == ["dir/b", "c"]
    focus.move("dir", "other")
    assert focus.paths() == ["other/b", "c"]
    with pytest.raises(ToolError, match="not in focus"):
        focus.remove("zzz")


def test_focus_contents_read_now_and_vanished_files_dropped(ctx: ToolContext) -> None:
    root = ctx.workspace.root
    (root / "a.txt").write_text("first")
    (root / "b.txt").write_text("gone soon")
    (root / "big.txt").write_text("z" * 50_000)
    for name in ("a.txt", "b.txt", "big.txt"):
        assert call(ctx, "focus_file", path=name).ok
    (root / "a.txt").write_text("second")
    (root / "b.txt").unlink()
    contents = dict(ctx.focus.contents(ctx.workspace))
    assert contents["a.txt"] == "second"
    assert "characters omitted" in contents["big.txt"] and len(contents["big.txt"]) < 21_000
    assert ctx.focus.paths() == ["a.txt", "big.txt"]


def test_focus_tools(ctx: ToolContext) -> None:
    root = ctx.workspace.root
    for name in ("a", "b", "c", "d"):
        (root / name).write_text(name)
    for name in ("a", "b", "c"):
        assert call(ctx, "focus_file", path=name).ok
    full = call(ctx, "focus_file", path="d")
    assert not full.ok and "a, b, c" in full.output
    assert not call(ctx, "focus_file", path="missing.txt").ok
    assert not call(ctx, "focus_file", path=".").ok
    assert call(ctx, "unfocus_file", path="./b").ok
    assert "a, c" in call(ctx, "focus_file", path="d").output
    assert not call(ctx, "unfocus_file", path="b").ok
    assert ctx.focus.paths() == ["a", "c", "d"]


def test_memory_store_scopes_and_limit(tmp_path: Path) -> None:
    memory = MemoryStore(tmp_path, limit=100)
    memory.append("main", "c1", "likes tabs")
    memory.append("main", "c2", "uses pytest")
    assert memory.read("main", "anything") == "likes tabs\nuses pytest\n"
    memory.replace("task", "c1", "step 1 done")
    assert memory.read("task", "c1") == "step 1 done\n"
    assert memory.read("task", "c2") == ""
    assert (tmp_path / "memory/tasks/c1.md").exists()
    assert (tmp_path / "memory/main.md").exists()
    with pytest.raises(ToolError, match="over the 100 limit"):
        memory.append("main", "c1", "x" * 100)
    assert memory.read("main", "c1") == "likes tabs\nuses pytest\n"
    for bad in ("../escape", "a/b", "", ".."):
        with pytest.raises(ToolError, match="Invalid conversation id"):
            memory.read("task", bad)


def test_update_memory_tool(ctx: ToolContext) -> None:
    result = call(ctx, "update_memory", scope="task", operation="append", content="plan: A")
    assert result.ok and "task memory" in result.output
    call(ctx, "update_memory", scope="task", operation="append", content="then B")
    assert ctx.memory.read("task", "conv-1") == "plan: A\nthen B\n"
    call(ctx, "update_memory", scope="main", operation="replace", content="# Facts\n")
    assert ctx.memory.read("main", "conv-1") == "# Facts\n"
    too_big = call(ctx, "update_memory", scope="main", operation="append", content="y" * 30_000)
    assert not too_big.ok and "replace" in too_big.output
    assert not call(ctx, "update_memory", scope="global", operation="append", content="x").ok
