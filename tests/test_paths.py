"""The workspace resolver and the file tools against escape attempts, with a sentinel beside."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from modules.tools.tool_context import ToolContext
from modules.workspace.paths import PathOutsideWorkspace, Workspace
from tests.kit.tools import call, make_ctx, snapshot


@pytest.fixture
def setup(tmp_path: Path) -> tuple[ToolContext, Path, Path]:
    ctx = make_ctx(tmp_path)
    ws = ctx.workspace.root
    outside = tmp_path / "outside"
    (outside / "sub").mkdir(parents=True)
    (outside / "secret.txt").write_text("secret")
    (outside / "sub" / "deep.txt").write_text("deep")
    (ws / "inside.txt").write_text("inside\n")
    (ws / "real").mkdir()
    (ws / "real" / "target.txt").write_text("target\n")
    (ws / "link_file_abs").symlink_to(outside / "secret.txt")
    (ws / "link_file_rel").symlink_to("../outside/secret.txt")
    (ws / "link_dir").symlink_to(outside)
    (ws / "link_dir_rel").symlink_to("../outside")
    (ws / "chain2").symlink_to(outside / "secret.txt")
    (ws / "chain1").symlink_to("chain2")
    (ws / "real" / "linkdir").symlink_to(outside)
    (ws / "dangling").symlink_to(outside / "not-yet.txt")
    (ws / "dangling_rel").symlink_to("../outside/also-not-yet.txt")
    (ws / "to_parent").symlink_to(tmp_path)
    (ws / "inlink").symlink_to("real/target.txt")
    return ctx, ws, outside


BAD_RELATIVE = [
    "..",
    "../",
    "../outside/secret.txt",
    "../outside",
    "a/../../outside/secret.txt",
    "./../outside",
    "a/b/../../../outside/x.txt",
    "../../etc/passwd",
    "..//outside//secret.txt",
    "real/./../../outside/new.txt",
    "real/../..",
    "/etc/passwd",
    "/",
    "~",
    "~/x.txt",
    "~root/x.txt",
    "a\x00b.txt",
    "",
    "   ",
    "x" * 300,
    "a/" * 2100 + "x",
    "..\\outside\\secret.txt",
    "C:\\Windows\\win.ini",
    "C:/x.txt",
    "link_file_abs",
    "link_file_rel",
    "link_dir/secret.txt",
    "link_dir/new.txt",
    "link_dir/sub/deep.txt",
    "link_dir_rel/secret.txt",
    "link_dir",
    "chain1",
    "real/linkdir/sub/new.txt",
    "real/linkdir/secret.txt",
    "dangling",
    "dangling_rel",
    "to_parent/outside/secret.txt",
    "link_dir/../outside/secret.txt",
]


def _bad_paths(tmp_path: Path) -> list[str]:
    ws = tmp_path / "ws"
    absolute = [
        str(tmp_path / "outside" / "secret.txt"),
        str(ws / "link_dir" / "secret.txt"),
        f"{ws}/../outside/new.txt",
        str(tmp_path),
    ]
    return BAD_RELATIVE + absolute


@pytest.mark.parametrize("for_write", [False, True])
def test_resolver_rejects_every_escape(setup, tmp_path: Path, for_write: bool) -> None:
    ctx, _, _ = setup
    bad = _bad_paths(tmp_path)
    assert len(bad) >= 30
    for path in bad:
        with pytest.raises(PathOutsideWorkspace) as info:
            ctx.workspace.resolve(path, for_write=for_write)
        message = str(info.value)
        assert message and len(message) < 400, path
        if path.strip() and "\x00" not in path and len(path) < 200:
            assert repr(path)[1:-1][:30] in message or path[:30] in message, (path, message)


def test_resolver_messages_say_why(setup, tmp_path: Path) -> None:
    ctx, _, _ = setup
    cases = {
        "../x": "'..' leads out of the workspace",
        "/etc/passwd": "absolute paths must point inside",
        "link_dir/secret.txt": "symbolic link",
        "~/x": "home directories",
        "a\x00b": "NUL",
        "": "empty",
        "x" * 300: "filesystem limit",
        "..\\x": "forward slashes",
    }
    for path, why in cases.items():
        with pytest.raises(PathOutsideWorkspace, match=why):
            ctx.workspace.resolve(path)


TOOL_CALLS = [
    ("create_file", lambda p: {"path": p, "content": "pwned"}),
    ("create_folder", lambda p: {"path": p}),
    ("read_file", lambda p: {"path": p}),
    ("modify_file", lambda p: {"path": p, "operation": "append", "content": "pwned"}),
    ("modify_file", lambda p: {"path": p, "operation": "clear"}),
    ("delete_file", lambda p: {"path": p}),
    ("rename_file", lambda p: {"old_path": p, "new_path": "moved-here.txt"}),
    ("rename_file", lambda p: {"old_path": "inside.txt", "new_path": p}),
    ("list_files", lambda p: {"directory": p}),
    ("focus_file", lambda p: {"path": p}),
]


def test_tools_reject_escapes_and_change_nothing_outside(setup, tmp_path: Path) -> None:
    ctx, ws, _ = setup
    before = snapshot(tmp_path)
    for path in _bad_paths(tmp_path):
        for name, make_args in TOOL_CALLS:
            result = call(ctx, name, **make_args(path))
            assert not result.ok, (name, path, result.output)
            assert not result.output.startswith(f"{name} failed:"), result.output
            assert result.changes == []
    assert snapshot(tmp_path) == before
    assert (ws / "inside.txt").read_text() == "inside\n"
    assert not (ws / "moved-here.txt").exists()
    assert ctx.focus.paths() == []


def test_delete_refuses_workspace_root(setup) -> None:
    ctx, ws, _ = setup
    for path in (".", "./", "real/..", str(ws)):
        result = call(ctx, "delete_file", path=path)
        assert not result.ok
        assert "workspace root" in result.output
    assert (ws / "inside.txt").exists()


def test_write_through_parent_that_is_a_file(setup) -> None:
    ctx, _, _ = setup
    result = call(ctx, "create_file", path="inside.txt/child.txt", content="x")
    assert not result.ok
    assert "is a file, not a folder" in result.output


def test_legit_paths_resolve_inside(setup) -> None:
    ctx, ws, _ = setup
    resolve = ctx.workspace.resolve
    assert resolve(".") == ws
    assert resolve("a/b/c.txt", for_write=True) == ws / "a" / "b" / "c.txt"
    assert resolve("données/résumé.txt") == ws / "données" / "résumé.txt"
    assert resolve("my dir/my file.txt") == ws / "my dir" / "my file.txt"
    assert resolve("./real/../inside.txt") == ws / "inside.txt"
    assert resolve(str(ws / "inside.txt")) == ws / "inside.txt"
    assert resolve("inlink") == ws / "real" / "target.txt"
    assert resolve("inlink", follow_symlinks=False) == ws / "inlink"
    assert resolve("%2e%2e/x") == ws / "%2e%2e" / "x"
    assert resolve("....") == ws / "...."
    assert resolve("n" * 255) == ws / ("n" * 255)
    assert ctx.workspace.relative(ws / "données" / "x.txt") == "données/x.txt"
    assert ctx.workspace.relative(ws) == ""


def test_legit_paths_work_through_tools(setup) -> None:
    ctx, ws, _ = setup
    for path in ("a/b/c.txt", "données/résumé.txt", "my dir/my file.txt", "n" * 255):
        assert call(ctx, "create_file", path=path, content="hello\n").ok
        read = call(ctx, "read_file", path=path)
        assert read.ok and "hello" in read.output
    assert call(ctx, "modify_file", path="inlink", operation="append", content="more\n").ok
    assert (ws / "real" / "target.txt").read_text() == "target\nmore\n"
    assert (ws / "inlink").is_symlink()
    assert call(ctx, "rename_file", old_path="inlink", new_path="inlink2").ok
    assert (ws / "inlink2").is_symlink() and (ws / "real" / "target.txt").exists()
    assert call(ctx, "delete_file", path="inlink2").ok
    assert (ws / "real" / "target.txt").exists()


def test_workspace_root_given_through_a_symlink(tmp_path: Path) -> None:
    real = tmp_path / "real-ws"
    real.mkdir()
    (tmp_path / "ws-link").symlink_to(real)
    ws = Workspace(tmp_path / "ws-link")
    assert ws.root == real
    assert ws.resolve(str(tmp_path / "ws-link" / "a.txt")) == real / "a.txt"
    with pytest.raises(PathOutsideWorkspace):
        ws.resolve("../ws-link/../x")


def test_hard_links_to_outside_files_are_never_written_through(setup, tmp_path: Path) -> None:
    ctx, ws, outside = setup
    os.link(outside / "secret.txt", ws / "hard.txt")
    before = snapshot(tmp_path / "outside")
    calls = [
        ("modify_file", {"path": "hard.txt", "operation": "append", "content": "pwned"}),
        (
            "modify_file",
            {"path": "hard.txt", "operation": "replace", "old_text": "secret", "new_text": "pwned"},
        ),
        ("create_file", {"path": "hard.txt", "content": "pwned"}),
        ("modify_file", {"path": "hard.txt", "operation": "clear"}),
        ("rename_file", {"old_path": "hard.txt", "new_path": "hard2.txt"}),
        ("delete_file", {"path": "hard2.txt"}),
    ]
    for name, args in calls:
        assert call(ctx, name, **args).ok, name
    assert snapshot(tmp_path / "outside") == before
    assert (outside / "secret.txt").read_text() == "secret"


@pytest.mark.parametrize(
    "name",
    [
        "%2e%2e/x.txt",
        "..%2fx.txt",
        "．．/x.txt",
        "\u2024\u2024/x.txt",
        "OUTSIDE/x.txt",
        "..x/y.txt",
        "x../y.txt",
        "...",
        "....//x.txt",
        " ../x.txt",
    ],
)
def test_lookalike_names_stay_inside_the_workspace(setup, tmp_path: Path, name: str) -> None:
    ctx, ws, _ = setup
    before = snapshot(tmp_path / "outside")
    result = call(ctx, "create_file", path=name, content="here")
    if result.ok:
        created = ctx.workspace.resolve(name)
        assert ws in created.parents and created.read_text() == "here"
    assert snapshot(tmp_path / "outside") == before
