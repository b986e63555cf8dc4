"""What the listings skip: git's .gitignore rules, the built-in names, and the tools using them."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from modules.tools.tool_context import ToolContext
from modules.undo.journal import UndoJournal
from modules.workspace import ignore as ignore_module
from modules.workspace.file_tree import describe_tree, file_tree
from modules.workspace.file_watcher import WorkspaceWatcher
from modules.workspace.ignore import MAX_GITIGNORE_BYTES, SKIPPED_DIRS, WorkspaceIgnore
from tests.kit.tools import call
from tests.kit.waits import wait_until

F, D = False, True  # is_dir

# (root .gitignore, path, is_dir, hidden)
GIT_RULES = [
    ("*.log", "a.log", F, True),
    ("*.log", "deep/er/a.log", F, True),
    ("*.log", "a.logx", F, False),
    ("# a comment\n\n*.o", "x.o", F, True),
    ("# a comment", "# a comment", F, False),
    ("\\#hash", "#hash", F, True),
    ("trail   ", "trail", F, True),
    ("trail\\ ", "trail ", F, True),
    ("trail\\ ", "trail", F, False),
    ("*.log\n!keep.log", "keep.log", F, False),
    ("*.log\n!keep.log", "other.log", F, True),
    ("!keep.log\n*.log", "keep.log", F, True),
    ("\\!bang", "!bang", F, True),
    ("build/", "build", D, True),
    ("build/", "build", F, False),
    ("build/", "src/build", D, True),
    ("build/", "build/x.o", F, True),
    ("build/\n!build/keep.txt", "build/keep.txt", F, True),
    ("build/*\n!build/keep.txt", "build/keep.txt", F, False),
    ("build/*\n!build/keep.txt", "build/x.o", F, True),
    ("/top.txt", "top.txt", F, True),
    ("/top.txt", "sub/top.txt", F, False),
    ("doc/frotz", "doc/frotz", F, True),
    ("doc/frotz", "a/doc/frotz", F, False),
    ("foo/*", "foo/bar", D, True),
    ("foo/*", "foo/bar/hello.c", F, True),
    ("foo/*", "foo", D, False),
    ("?.txt", "a.txt", F, True),
    ("?.txt", "ab.txt", F, False),
    ("[abc].py", "b.py", F, True),
    ("[abc].py", "d.py", F, False),
    ("[!abc].py", "d.py", F, True),
    ("[!abc].py", "a.py", F, False),
    ("[a-c]x", "bx", F, True),
    ("[a-c]x", "dx", F, False),
    ("**/logs", "logs", D, True),
    ("**/logs", "a/b/logs", D, True),
    ("**/logs/debug.log", "logs/debug.log", F, True),
    ("**/logs/debug.log", "x/y/logs/debug.log", F, True),
    ("**/logs/debug.log", "logs/x/debug.log", F, False),
    ("abc/**", "abc", D, False),
    ("abc/**", "abc/x", F, True),
    ("abc/**", "abc/x/y", F, True),
    ("a/**/b", "a/b", F, True),
    ("a/**/b", "a/x/y/b", F, True),
    ("a/**/b", "x/a/b", F, False),
    ("*", "anything", F, True),
    ("*", ".gitignore", F, False),  # the .gitignore itself stays shown
    ("", "node_modules/left-pad/index.js", F, True),
    ("", "src/.venv", D, True),
    ("", "src/.main.py.swp", F, True),
    ("", "4913", F, True),
    ("", "src/main.py", F, False),
]


def _write(root: Path, rel: str, text: str = "") -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.mark.parametrize(("patterns", "rel", "is_dir", "hidden"), GIT_RULES)
def test_gitignore_rules(tmp_path: Path, patterns: str, rel: str, is_dir: bool, hidden: bool):
    (tmp_path / ".gitignore").write_text(patterns + "\n")
    assert WorkspaceIgnore(tmp_path).hides(rel, is_dir) is hidden


def test_nested_gitignore_applies_to_its_own_folder_and_below(tmp_path: Path):
    _write(tmp_path, ".gitignore", "*.log\n")
    _write(tmp_path, "sub/.gitignore", "!keep.log\n/only\n")
    ignore = WorkspaceIgnore(tmp_path)
    assert ignore.hides("keep.log", F)
    assert not ignore.hides("sub/keep.log", F)
    assert not ignore.hides("sub/deeper/keep.log", F)
    assert ignore.hides("other/keep.log", F)
    assert ignore.hides("sub/only", F)
    assert not ignore.hides("sub/deeper/only", F)
    assert not ignore.hides("only", F)
    assert ignore.folder("sub").hides("only", F)


def test_an_edited_gitignore_takes_effect(tmp_path: Path):
    path = _write(tmp_path, ".gitignore", "*.a\n")
    ignore = WorkspaceIgnore(tmp_path)
    assert ignore.hides("x.a", F) and not ignore.hides("x.b", F)
    before = path.stat().st_mtime_ns
    path.write_text("*.b\n")  # same size: only the mtime tells the cache
    os.utime(path, ns=(before + 10**9, before + 10**9))
    assert ignore.hides("x.b", F) and not ignore.hides("x.a", F)
    path.unlink()
    assert not ignore.hides("x.b", F)


def test_undo_skips_the_built_in_folders_only():
    assert {".git", "node_modules", ".venv", "venv", "__pycache__", ".tox", ".nox"} <= SKIPPED_DIRS


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_the_matcher_agrees_with_git_check_ignore(tmp_path: Path):
    root = tmp_path / "repo"
    root.mkdir()
    top_rules = ["*.log", "!important.log", "build/", "/top/", "docs/**/draft*", "[0-9]*.tmp2"]
    _write(root, ".gitignore", "\n".join(["# comment", *top_rules, "src/cache/c2  "]) + "\n")
    _write(root, "src/.gitignore", "*.gen\n!keep.gen\n/local\ncache/*\n!cache/keep\n")
    _write(root, "build/.gitignore", "!*\n")
    files = [
        "a.log",
        "important.log",
        "src/x.log",
        "src/important.log",
        "build/out.o",
        "build/keep.txt",
        "src/build/o",
        "top/t.txt",
        "src/top/t.txt",
        "docs/draft1.md",
        "docs/a/b/draft2.md",
        "docs/final.md",
        "1.tmp2",
        "a1.tmp2",
        "src/z.gen",
        "src/keep.gen",
        "src/deep/z.gen",
        "src/local",
        "src/deep/local",
        "src/cache/c1",
        "src/cache/keep",
        "src/cache/c2",
        "readme.md",
    ]
    for rel in files:
        _write(root, rel)
    paths = files + sorted({str(Path(f).parent) for f in files} - {"."})
    env = {**os.environ, "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path)}
    env["GIT_CONFIG_NOSYSTEM"] = "1"
    subprocess.run(["git", "init", "-q", str(root)], check=True, env=env)
    answer = subprocess.run(
        ["git", "-C", str(root), "check-ignore", "--no-index", "--stdin"],
        input="\n".join(paths) + "\n",
        capture_output=True,
        text=True,
        env=env,
    )
    assert answer.returncode in (0, 1), answer.stderr
    ignore = WorkspaceIgnore(root)
    ours = {p for p in paths if ignore.hides(p, (root / p).is_dir())}
    assert ours == set(answer.stdout.split())
    assert 10 < len(ours) < len(paths) - 5


# --- through the tools ------------------------------------------------------------------


@pytest.fixture
def ctx(ctx: ToolContext) -> ToolContext:
    root = ctx.workspace.root
    _write(root, ".gitignore", "dist/\n*.log\n")
    for rel in (
        "src/a.py",
        "dist/out.js",
        "app.log",
        "src/debug.log",
        "node_modules/x/index.js",
        ".venv/lib.py",
        "src/__pycache__/a.pyc",
    ):
        _write(root, rel, "needle\n")
    return ctx


def test_list_files_skips_gitignored_and_built_in_folders(ctx: ToolContext):
    assert call(ctx, "list_files").output.splitlines() == [
        "the workspace:",
        "src/",
        ".gitignore",
        "src/a.py",
    ]
    assert call(ctx, "list_files", directory="dist").output.splitlines() == [
        "dist:",
        "dist/out.js",
    ]


def test_search_code_skips_gitignored_and_built_in_folders(ctx: ToolContext):
    assert call(ctx, "search_code", query="needle").output == "src/a.py:1: needle"


def test_the_file_tree_skips_gitignored_and_built_in_folders(ctx: ToolContext):
    tree = file_tree(ctx.workspace, ctx.annotations)
    assert [c["path"] for c in tree["children"]] == ["src", ".gitignore"]
    assert [c["path"] for c in tree["children"][0]["children"]] == ["src/a.py"]
    assert describe_tree(ctx.workspace, ctx.annotations) == "src/\n  a.py\n.gitignore"


def test_undo_restores_a_gitignored_file_a_command_deleted(ctx: ToolContext, tmp_path: Path):
    journal = UndoJournal(tmp_path / "data", ctx.workspace)
    ctx.journal = journal.task("conv-1", "task-1")
    result = call(ctx, "run_command", command="rm -r dist app.log")
    assert result.ok, result.output
    ctx.journal.finish()
    journal.undo("conv-1")
    root = ctx.workspace.root
    assert (root / "dist/out.js").read_text() == "needle\n"
    assert (root / "app.log").read_text() == "needle\n"


def test_the_live_tree_skips_gitignored_and_built_in_folders(ctx: ToolContext) -> None:
    root = ctx.workspace.root
    batches: list[list[dict[str, Any]]] = []
    watcher = WorkspaceWatcher(
        root,
        on_changes=lambda changes, _refresh: batches.append(changes),
        start_background_task=lambda target: threading.Thread(target=target, daemon=True).start(),
    )
    watcher.start()
    try:
        assert watcher.ready.wait(10), "the watcher child never became ready"
        for rel in ("dist/new.js", "more.log", "node_modules/y.js", "src/b.py", "last.txt"):
            _write(root, rel)
        wait_until(lambda: _changed(batches, "last.txt"), 5, "the change of last.txt")
        assert {c["path"] for batch in batches for c in batch} == {"src/b.py", "last.txt"}
    finally:
        watcher.stop()


def _changed(batches: list[list[dict[str, Any]]], path: str) -> bool:
    return any(c["path"] == path for batch in batches for c in batch)


# --- a hostile .gitignore: the server reads what a task wrote ------------------------------


def test_a_backtracking_pattern_matches_at_once(tmp_path: Path):
    """`*a` twenty times then `b` took hours against a 60-letter name with the regex of
    each star free to backtrack, the server's every thread stopped meanwhile (the GIL)."""
    (tmp_path / ".gitignore").write_text("*a" * 20 + "b\n" + "**/x" * 30 + "/y\n")
    ignore = WorkspaceIgnore(tmp_path)
    started = time.monotonic()
    assert not ignore.hides("a" * 60, F)
    assert ignore.hides("a" * 60 + "b", F)
    assert not ignore.hides("/".join(["x"] * 500), F)
    assert time.monotonic() - started < 1


def test_a_gitignore_over_the_size_limit_is_not_read(tmp_path: Path):
    filler = "# filler\n" * (MAX_GITIGNORE_BYTES // 9 + 1)
    (tmp_path / ".gitignore").write_text("*.log\n" + filler)
    assert not WorkspaceIgnore(tmp_path).hides("a.log", F)
    (tmp_path / ".gitignore").write_text("*.log\n" + filler[: MAX_GITIGNORE_BYTES - 100])
    assert WorkspaceIgnore(tmp_path).hides("a.log", F)


def test_a_gitignore_that_is_a_pipe_or_a_link_out_is_not_read(tmp_path: Path):
    root, outside = tmp_path / "ws", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / ".gitignore").write_text("*.log\n")
    os.mkfifo(root / ".gitignore")  # opened to read, it would wait for a writer forever
    (root / "sub").symlink_to(outside)
    ignore = WorkspaceIgnore(root)
    assert not ignore.hides("a.log", F)
    assert not ignore.hides("sub/a.log", F)
    assert not ignore.folder("sub").hides("a.log", F)


def test_a_listing_past_its_time_for_gitignore_files_leaves_out_the_built_in_names_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    (tmp_path / ".gitignore").write_text("*.log\n")
    assert WorkspaceIgnore(tmp_path).hides("a.log", F)
    monkeypatch.setattr(ignore_module, "LISTING_SECONDS", 0.0)
    late = WorkspaceIgnore(tmp_path)
    assert not late.hides("a.log", F)
    assert late.hides("node_modules", D) and late.folder("").hides("x.swp", F)
