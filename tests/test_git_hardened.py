"""git on a repository the agent wrote: its config, hooks, attributes and includes plant code
at every place git could run some; the hardened runner (modules/workspace/git.py) runs none
of it, jailed or not, while status, diff, stage, unstage and commit still work."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from modules.sandbox.worker_jail import WorkerJail, worker_jail
from modules.workspace import git_ops
from modules.workspace.git import FILTER_KEYS, HARDENED, Git, GitError
from utils.settings import LocalSandboxSettings

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="the git program is missing")

PLANTS = (
    "fsmonitor",
    "hook",
    "hookspath",
    "clean",
    "smudge",
    "process",
    "textconv",
    "diffcommand",
    "external",
    "alias",
    "ssh",
    "included",
    "pager",
    "editor",
    "gpg",
)


def plain_git(ws: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """git as a careless caller would run it on the workspace."""
    env = {**os.environ, "GIT_WORK_TREE": str(ws), "GIT_DIR": str(ws / ".git")}
    return subprocess.run(
        ["git", *args], cwd=ws, env=env, capture_output=True, text=True, timeout=30, check=False
    )


def plant(ws: Path, markers: Path) -> None:
    """A repository whose every code-running knob writes a marker file named after it."""
    plain_git(ws, "init", "-q", "-b", "main")
    script = ws / "plant.sh"
    script.write_text(f'#!/bin/sh\ntouch "{markers}/$1"\ncat\n')
    script.chmod(0o755)
    run = f"{script}"
    gpg = ws / "gpg.sh"
    gpg.write_text(f'#!/bin/sh\ntouch "{markers}/gpg"\n')
    gpg.chmod(0o755)
    hooks = ws / ".git" / "hooks"
    for name in ("pre-commit", "commit-msg", "prepare-commit-msg", "post-commit",
                 "post-index-change", "reference-transaction", "pre-auto-gc"):  # fmt: skip
        (hooks / name).write_text(f"#!/bin/sh\n{run} hook\n")
        (hooks / name).chmod(0o755)
    elsewhere = ws / "myhooks"
    shutil.copytree(hooks, elsewhere)
    for hook in elsewhere.iterdir():
        hook.write_text(f"#!/bin/sh\n{run} hookspath\n")
    (ws / "included.cfg").write_text(
        f"[core]\n\tfsmonitor = {run} included\n"
        f'[filter "inc"]\n\tclean = {run} included\n\tsmudge = {run} included\n'
    )
    with (ws / ".git" / "config").open("a") as config:
        config.write(
            f"[core]\n\tfsmonitor = {run} fsmonitor\n\thooksPath = {elsewhere}\n"
            f"\tsshCommand = {run} ssh\n\tpager = {run} pager\n\teditor = {run} editor\n"
            f"\tworktree = /\n"
            f'[filter "evil"]\n\tclean = {run} clean\n\tsmudge = {run} smudge\n'
            f"\tprocess = {run} process\n\trequired = true\n"
            f'[diff "evil"]\n\ttextconv = {run} textconv\n\tcommand = {run} diffcommand\n'
            f"[diff]\n\texternal = {run} external\n"
            f"[alias]\n\tst = !{run} alias\n\tci = !{run} alias\n"
            f"[commit]\n\tgpgSign = true\n[gpg]\n\tprogram = {gpg}\n"
            f"[log]\n\tshowSignature = true\n"
            f'[includeIf "gitdir:{ws}/"]\n\tpath = {ws / "included.cfg"}\n'
        )
    (ws / ".gitattributes").write_text("*.txt filter=evil diff=evil\n*.md filter=inc diff=evil\n")
    (ws / ".git" / "info").mkdir(exist_ok=True)
    (ws / ".git" / "info" / "attributes").write_text("*.py filter=evil diff=evil\n")
    (ws / "a.txt").write_text("one\n")
    (ws / "b.md").write_text("two\n")
    (ws / "c.py").write_text("three\n")


@pytest.fixture
def planted(tmp_path: Path) -> tuple[Path, Path]:
    ws, markers = tmp_path / "ws", tmp_path / "ws" / "markers"
    ws.mkdir()
    markers.mkdir()
    plant(ws, markers)
    return ws, markers


def test_the_plants_run_under_a_careless_git(planted: tuple[Path, Path]) -> None:
    """The control: each kind of plant is live, so its absence below proves something."""
    ws, markers = planted
    plain_git(ws, "add", "a.txt")
    plain_git(ws, "add", "b.md")
    plain_git(ws, "commit", "-m", "x")
    plain_git(ws, "-c", "commit.gpgSign=false", "commit", "-m", "x")
    plain_git(ws, "st")
    (ws / "b.md").write_text("changed\n")
    plain_git(ws, "diff", "--no-ext-diff", "HEAD")
    plain_git(ws, "diff", "HEAD")
    ran = {m.name for m in markers.iterdir()}
    live = {"process", "included", "hookspath", "alias", "textconv", "diffcommand", "gpg"}
    assert live <= ran


def jails() -> list[WorkerJail]:
    jailed = worker_jail(LocalSandboxSettings())
    return [WorkerJail()] + ([jailed] if jailed.bubblewrap is not None else [])


def quiet_git(ws: Path, *args: str) -> None:
    """git told on its command line to run nothing the repository names (as ours is)."""
    off = {**HARDENED, **{f"filter.{n}.{k}": "" for n in ("evil", "inc") for k in FILTER_KEYS}}
    options = [part for key, value in off.items() for part in ("-c", f"{key}={value}")]
    done = plain_git(ws, *options, "-c", "filter.evil.required=false", *args)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("jail", jails(), ids=lambda j: "jailed" if j.bubblewrap else "host")
def test_no_planted_code_runs_and_git_still_works(
    planted: tuple[Path, Path], jail: WorkerJail
) -> None:
    ws, markers = planted
    git = Git(ws, jail)
    listed = {f["path"] for f in git_ops.status(git).files}
    assert {"a.txt", "b.md", "c.py", ".gitattributes"} <= listed  # the workspace, not "/"
    if jail.bubblewrap is None and os.geteuid() == 0:
        with pytest.raises(GitError, match="need bubblewrap"):
            git_ops.stage(git, ["a.txt"])
        quiet_git(ws, "add", "a.txt", "b.md")
        quiet_git(ws, "commit", "-q", "-m", "Plant nothing")
        head = plain_git(ws, "rev-parse", "HEAD").stdout.strip()
    else:
        git_ops.stage(git, ["a.txt", "b.md", "c.py"])
        assert "+one" in git_ops.diff(git, staged=True, path="a.txt")["diff"]
        git_ops.unstage(git, ["c.py"])
        head = git_ops.commit(git, "Plant nothing\n\nbody")["commit"]
    (ws / "a.txt").write_text("one\nmore\n")
    (ws / "b.md").write_text("changed\n")
    assert "+more" in git_ops.diff(git, path="a.txt")["diff"]  # the clean filter would run
    assert "+changed" in git_ops.diff(git)["diff"]
    status = git_ops.status(git)
    assert status.branch == "main" and status.head == head
    assert not list(markers.iterdir()), "planted code ran"
    logged = plain_git(ws, "--no-pager", "-c", "log.showSignature=false", "log", "--format=%s")
    assert logged.stdout.split("\n")[0] == "Plant nothing"
    shown = plain_git(ws, "cat-file", "-p", f"{head}:a.txt")
    assert shown.stdout == "one\n"  # stored as it is: no clean filter ran on it


def test_a_git_file_or_link_leading_out_is_refused(tmp_path: Path) -> None:
    elsewhere, ws = tmp_path / "elsewhere", tmp_path / "ws"
    elsewhere.mkdir()
    plain_git(elsewhere, "init", "-q")
    ws.mkdir()
    (ws / ".git").write_text(f"gitdir: {elsewhere / '.git'}\n")
    with pytest.raises(GitError, match="not a git repository"):
        git_ops.status(Git(ws))
    (ws / ".git").unlink()
    (ws / ".git").symlink_to(elsewhere / ".git")
    assert not Git(ws).is_repository()
    (ws / ".git").unlink()
    (ws / ".git").mkdir()
    (ws / ".git" / "commondir").write_text(f"{elsewhere / '.git'}\n")
    with pytest.raises(GitError, match="commondir"):
        git_ops.status(Git(ws))


def test_pathspecs_are_literal_and_stay_in_the_workspace(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    plain_git(ws, "init", "-q", "-b", "main")
    (ws / "*.txt").write_text("star\n")
    (ws / "b.txt").write_text("b\n")
    git = Git(ws, worker_jail(LocalSandboxSettings()))
    if git.jail.bubblewrap is None and os.geteuid() == 0:
        pytest.skip("bubblewrap is not usable here: as root, git only reads")
    git_ops.stage(git, ["*.txt"])
    staged = {f["path"]: f["index"] for f in git_ops.status(git).files}
    assert staged == {"*.txt": "A", "b.txt": "?"}
    for bad in ("../x", "/etc/passwd"):
        with pytest.raises(GitError, match="Not a workspace path"):
            git_ops.stage(git, [bad])
    with pytest.raises(GitError, match="needs a message"):
        git_ops.commit(git, "  ")
