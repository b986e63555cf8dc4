"""The fd walk of modules.workspace.safe_fs: symlinks followed beneath the root, never out of it."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from modules.workspace.safe_fs import PathOutsideWorkspace, SafeRoot


@pytest.fixture
def fs(tmp_path: Path) -> SafeRoot:
    root = tmp_path / "ws"
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "b" / "f.txt").write_text("inside")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "f.txt").write_text("secret")
    (root / "rel").symlink_to("a/b")
    (root / "a" / "up").symlink_to("../a/b/f.txt")
    (root / "abs").symlink_to(root / "a" / "b")
    (root / "out_abs").symlink_to(tmp_path / "outside")
    (root / "out_rel").symlink_to("../outside")
    (root / "a" / "deep_out").symlink_to("../../outside/f.txt")
    (root / "loop1").symlink_to("loop2")
    (root / "loop2").symlink_to("loop1")
    return SafeRoot(root)


def test_links_inside_are_followed(fs: SafeRoot) -> None:
    assert fs.read_bytes("rel/f.txt") == b"inside"
    assert fs.read_bytes("a/up") == b"inside"
    assert fs.read_bytes("abs/f.txt") == b"inside"
    assert fs.readlink("rel") == "a/b"
    link = fs.lstat("rel")
    assert link is not None and link.st_mode & 0o170000 == 0o120000


@pytest.mark.parametrize("rel", ["out_abs/f.txt", "out_rel/f.txt", "a/deep_out", "a/../../x"])
def test_links_and_dots_never_lead_out(fs: SafeRoot, rel: str) -> None:
    with pytest.raises(PathOutsideWorkspace):
        fs.read_bytes(rel)
    with pytest.raises(PathOutsideWorkspace):
        fs.write_atomic(rel, b"pwned")


def test_link_loops_stop(fs: SafeRoot) -> None:
    with pytest.raises(OSError) as info:
        fs.read_bytes("loop1")
    assert info.value.errno == errno.ELOOP


def test_changes_act_on_links_themselves(fs: SafeRoot) -> None:
    fs.write_atomic("new.txt", b"x")
    fs.rename("rel", "rel2")
    assert os.readlink(fs.root / "rel2") == "a/b"
    fs.remove("rel2")
    fs.remove("out_abs")
    assert (fs.root / "a" / "b" / "f.txt").exists()
    assert (fs.root.parent / "outside" / "f.txt").read_text() == "secret"
    assert fs.missing_folders("x/y/z") == ["x", "x/y", "x/y/z"]
    assert fs.missing_folders("a/b") == []


def test_a_rename_never_replaces_what_appeared_at_the_destination(tmp_path: Path) -> None:
    root = SafeRoot(tmp_path)
    (tmp_path / "a.txt").write_text("a")
    (tmp_path / "b.txt").write_text("b, created after the check")
    with pytest.raises(FileExistsError):
        root.rename("a.txt", "b.txt")
    assert (tmp_path / "b.txt").read_text() == "b, created after the check"
    root.rename("a.txt", "c.txt")
    assert (tmp_path / "c.txt").read_text() == "a" and not (tmp_path / "a.txt").exists()
