"""File tools on real files: results, atomic writes, changes, annotations and focus in sync."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from modules.tools.tool_context import ToolContext
from protocol.event_values import FileChange
from tests.kit.tools import call


def ws(ctx: ToolContext) -> Path:
    return ctx.workspace.root


def test_create_file_creates_parents_and_reports_changes(ctx: ToolContext) -> None:
    result = call(ctx, "create_file", path="a/b/c.txt", content="one\ntwo\n", annotation="notes")
    assert result.ok, result.output
    assert (ws(ctx) / "a/b/c.txt").read_text() == "one\ntwo\n"
    assert result.changes == [
        FileChange("created", "a", is_dir=True),
        FileChange("created", "a/b", is_dir=True),
        FileChange("created", "a/b/c.txt"),
    ]
    assert ctx.annotations.get("a/b/c.txt") == "notes"
    assert "Created a/b/c.txt (2 lines" in result.output


def test_create_file_overwrites_and_says_so(ctx: ToolContext) -> None:
    target = ws(ctx) / "x.sh"
    target.write_text("old")
    target.chmod(0o755)
    result = call(ctx, "create_file", path="x.sh", content="new")
    assert result.ok
    assert "Overwrote existing file x.sh" in result.output
    assert result.changes == [FileChange("modified", "x.sh")]
    assert target.read_text() == "new"
    assert stat.S_IMODE(target.stat().st_mode) == 0o755
    assert [p.name for p in ws(ctx).iterdir()] == ["x.sh"]  # no temp file left behind


def test_create_file_on_a_folder_fails(ctx: ToolContext) -> None:
    (ws(ctx) / "d").mkdir()
    result = call(ctx, "create_file", path="d", content="x")
    assert not result.ok and "is an existing folder" in result.output


def test_create_folder(ctx: ToolContext) -> None:
    result = call(ctx, "create_folder", path="p/q")
    assert result.ok and (ws(ctx) / "p/q").is_dir()
    assert [c.path for c in result.changes] == ["p", "p/q"]
    again = call(ctx, "create_folder", path="p/q")
    assert again.ok and "already exists" in again.output and again.changes == []
    (ws(ctx) / "f").write_text("")
    assert not call(ctx, "create_folder", path="f").ok


def test_read_file_numbers_lines_and_ranges(ctx: ToolContext) -> None:
    (ws(ctx) / "t.txt").write_text("".join(f"line {i}\r\n" for i in range(1, 11)))
    whole = call(ctx, "read_file", path="t.txt")
    assert whole.ok
    assert whole.output.splitlines()[0] == "t.txt (lines 1-10 of 10)"
    assert "     3\tline 3" in whole.output and "\r" not in whole.output
    part = call(ctx, "read_file", path="t.txt", start_line=4, end_line=5)
    assert part.output.splitlines()[1:] == ["     4\tline 4", "     5\tline 5"]
    assert "past the end" in call(ctx, "read_file", path="t.txt", start_line=50).output
    assert (
        "before start_line" in call(ctx, "read_file", path="t.txt", start_line=5, end_line=2).output
    )


def test_read_file_errors(ctx: ToolContext) -> None:
    (ws(ctx) / "bin.dat").write_bytes(b"\x89PNG\x00\x01\x02" * 10)
    (ws(ctx) / "big.txt").write_text("x" * 2_100_000)
    (ws(ctx) / "empty.txt").write_text("")
    (ws(ctx) / "dir").mkdir()
    assert "binary" in call(ctx, "read_file", path="bin.dat").output
    big = call(ctx, "read_file", path="big.txt")
    assert not big.ok and "byte limit" in big.output
    assert "No such file: nope.txt" in call(ctx, "read_file", path="nope.txt").output
    assert "is a folder" in call(ctx, "read_file", path="dir").output
    assert call(ctx, "read_file", path="empty.txt").output == "empty.txt is empty."


def test_read_file_long_output_stops_at_a_line(ctx: ToolContext) -> None:
    (ws(ctx) / "long.txt").write_text("".join(f"{'y' * 90} {i}\n" for i in range(1, 2001)))
    result = call(ctx, "read_file", path="long.txt")
    assert result.ok
    assert len(result.output) <= ctx.settings.output_limit_chars
    header = result.output.splitlines()[0]
    assert "of 2000; read on with start_line=" in header
    last = int(result.output.splitlines()[-1].split("\t")[0])
    assert f"start_line={last + 1})" in header


def test_modify_file_append_replace_clear(ctx: ToolContext) -> None:
    path = ws(ctx) / "m.py"
    path.write_bytes(b"a = 1\r\nb = 2\r\n")
    assert call(ctx, "modify_file", path="m.py", operation="append", content="c = 3\r\n").ok
    result = call(
        ctx, "modify_file", path="m.py", operation="replace", old_text="b = 2", new_text="b = 20"
    )
    assert result.ok and "line 2" in result.output
    assert result.changes == [FileChange("modified", "m.py")]
    assert path.read_bytes() == b"a = 1\r\nb = 20\r\nc = 3\r\n"
    assert call(ctx, "modify_file", path="m.py", operation="clear").ok
    assert path.read_bytes() == b""


def test_modify_file_replace_must_be_unique(ctx: ToolContext) -> None:
    path = ws(ctx) / "r.txt"
    path.write_text("x\nx\nx\n")
    twice = call(ctx, "modify_file", path="r.txt", operation="replace", old_text="x", new_text="y")
    assert not twice.ok and "occurs 3 times" in twice.output and "more surrounding" in twice.output
    missing = call(
        ctx, "modify_file", path="r.txt", operation="replace", old_text="z", new_text="y"
    )
    assert not missing.ok and "not found" in missing.output
    no_new = call(ctx, "modify_file", path="r.txt", operation="replace", old_text="x\nx\nx")
    assert not no_new.ok and "new_text" in no_new.output
    assert not call(ctx, "modify_file", path="r.txt", operation="append").ok
    assert not call(ctx, "modify_file", path="nope", operation="clear").ok
    assert not call(ctx, "modify_file", path="r.txt", operation="truncate").ok
    assert path.read_text() == "x\nx\nx\n"


def test_delete_file_and_folder_drop_annotations_and_focus(ctx: ToolContext) -> None:
    call(ctx, "create_file", path="d/one.txt", content="1", annotation="first")
    call(ctx, "create_file", path="d/two.txt", content="2", annotation="second")
    call(ctx, "create_file", path="keep.txt", content="k", annotation="kept")
    assert call(ctx, "focus_file", path="d/one.txt").ok
    assert call(ctx, "focus_file", path="keep.txt").ok
    result = call(ctx, "delete_file", path="d")
    assert result.ok and result.changes == [FileChange("deleted", "d", is_dir=True)]
    assert not (ws(ctx) / "d").exists()
    assert ctx.annotations.all() == {"keep.txt": "kept"}
    assert ctx.focus.paths() == ["keep.txt"]
    assert call(ctx, "delete_file", path="keep.txt").changes == [FileChange("deleted", "keep.txt")]
    assert "No such file" in call(ctx, "delete_file", path="keep.txt").output


def test_rename_moves_annotations_and_focus(ctx: ToolContext) -> None:
    call(ctx, "create_file", path="src/a.py", content="", annotation="module a")
    call(ctx, "focus_file", path="src/a.py")
    result = call(ctx, "rename_file", old_path="src", new_path="lib/src2")
    assert result.ok, result.output
    assert result.changes[-1] == FileChange("moved", "src", is_dir=True, dest_path="lib/src2")
    assert result.changes[0] == FileChange("created", "lib", is_dir=True)
    assert (ws(ctx) / "lib/src2/a.py").exists()
    assert ctx.annotations.all() == {"lib/src2/a.py": "module a"}
    assert ctx.focus.paths() == ["lib/src2/a.py"]


def test_rename_refuses_clobber_and_self_nesting(ctx: ToolContext) -> None:
    (ws(ctx) / "a.txt").write_text("a")
    (ws(ctx) / "b.txt").write_text("b")
    (ws(ctx) / "d").mkdir()
    clobber = call(ctx, "rename_file", old_path="a.txt", new_path="b.txt")
    assert not clobber.ok and "already exists" in clobber.output
    assert (ws(ctx) / "b.txt").read_text() == "b"
    assert "into itself" in call(ctx, "rename_file", old_path="d", new_path="d/e").output
    assert "No such file" in call(ctx, "rename_file", old_path="zz", new_path="yy").output


def test_list_files_recursive_with_pattern_and_notes(ctx: ToolContext) -> None:
    root = ws(ctx)
    (root / "src/pkg").mkdir(parents=True)
    (root / "src/pkg/mod.py").write_text("")
    (root / "src/main.py").write_text("")
    (root / "README.md").write_text("")
    (root / ".git/objects").mkdir(parents=True)
    (root / "src/__pycache__").mkdir()
    (root / "src/.main.py.swp").write_text("")
    ctx.annotations.set("src/main.py", "entry point")
    everything = call(ctx, "list_files").output.splitlines()
    assert everything == [
        "the workspace:",
        "src/",
        "README.md",
        "src/pkg/",
        "src/main.py  — entry point",
        "src/pkg/mod.py",
    ]
    py = call(ctx, "list_files", pattern="*.py").output.splitlines()[1:]
    assert py == ["src/main.py  — entry point", "src/pkg/mod.py"]
    sub = call(ctx, "list_files", directory="src", pattern="pkg/*").output.splitlines()
    assert sub == ["src:", "src/pkg/mod.py"]
    assert "No entries" in call(ctx, "list_files", pattern="*.rs").output
    assert "not a folder" in call(ctx, "list_files", directory="README.md").output


def test_list_files_is_capped(ctx: ToolContext) -> None:
    for i in range(600):
        (ws(ctx) / f"f{i:03}.txt").write_text("")
    lines = call(ctx, "list_files").output.splitlines()
    assert len(lines) == 502 and "stopped at 500 entries" in lines[-1]


def test_atomic_write_leaves_no_temp_files_on_failure(ctx: ToolContext, monkeypatch) -> None:
    target = ws(ctx) / "keep.txt"
    target.write_text("original")

    def boom(src: str, dst: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    result = call(ctx, "create_file", path="keep.txt", content="new")
    assert not result.ok
    assert target.read_text() == "original"
    assert sorted(p.name for p in ws(ctx).iterdir()) == ["keep.txt"]


def test_modify_file_refuses_non_utf8_text(ctx: ToolContext) -> None:
    path = ws(ctx) / "latin1.txt"
    path.write_bytes("café = 1\n".encode("latin-1"))
    result = call(ctx, "modify_file", path="latin1.txt", operation="append", content="x")
    assert not result.ok and "not valid UTF-8" in result.output
    assert path.read_bytes() == "café = 1\n".encode("latin-1")
    assert "caf\ufffd" in call(ctx, "read_file", path="latin1.txt").output
