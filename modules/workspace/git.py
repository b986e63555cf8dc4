"""The `git` program on the workspace's repository, run so that nothing the agent wrote in it
runs code outside the sandbox.

A task can write `.git/config` (and files it includes), hooks, `.gitattributes` and
`.git/info/attributes`. So git runs with no system or global config, every hook, fsmonitor,
pager, editor, external diff, textconv and signing program switched off by command-line config
(which outranks every file), `--no-optional-locks`, and each clean/smudge filter driver the
repository's config names emptied (git has no switch for all of them). `GIT_DIR` and
`GIT_WORK_TREE` name the workspace's own `.git` folder (a `.git` file or link, which could
lead out, is refused), so `core.worktree` cannot widen it. Where bubblewrap is usable, git
also runs in the workers' jail (modules/sandbox/worker_jail.py) with only the workspace bound:
no network, an unprivileged uid, nothing of the host writable, so a driver named between the
config's reading and git's start, or a link in `.git` to elsewhere, reaches nothing outside.
Without it git runs on the host with the same switches and, as root, only reads: staging and
committing are refused there (a link in `.git` could lead their writes out of the workspace),
and so is a `.git` naming another repository's folder (`commondir`).
Output is bounded and every run killed after GIT_SECONDS. We never call an alias.
"""

from __future__ import annotations

import dataclasses
import os
import stat
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from modules.sandbox.confinement import seccomp_pipe
from modules.sandbox.worker_jail import WorkerJail
from utils.workers import killed_after

GIT_SECONDS = 15.0
OUTPUT_BYTES = 4 * 1024 * 1024
ERROR_BYTES = 4096
FALLBACK_NAME = "Workspace Agent user"
FALLBACK_EMAIL = "user@workspace-agent.invalid"

# Command-line config: outranks the repository's config and whatever it includes.
HARDENED = {
    "core.hooksPath": "/dev/null",
    "core.fsmonitor": "false",
    "core.pager": "cat",
    "core.editor": "true",
    "core.askPass": "true",
    "core.sshCommand": "false",
    "core.gitProxy": "",
    "core.untrackedCache": "false",
    "diff.external": "",
    "sequence.editor": "true",
    "commit.gpgSign": "false",
    "tag.gpgSign": "false",
    "log.showSignature": "false",
    "gpg.program": "false",
    "gpg.ssh.program": "false",
    "gpg.x509.program": "false",
    "credential.helper": "",
    "submodule.recurse": "false",
    "status.submoduleSummary": "false",
    "diff.ignoreSubmodules": "all",
    "gc.auto": "0",
    "maintenance.auto": "false",
    "safe.directory": "*",
}
FILTER_KEYS = ("clean", "smudge", "process")
UNCONFINED_WRITES = (
    "Staging and committing here need bubblewrap, as the server runs as root: links the agent "
    "can put in .git could lead git's writes out of the workspace. Use git in your terminal."
)


class GitError(Exception):
    """git could not do what was asked; the message says why, for the user."""


@dataclass(frozen=True)
class GitResult:
    """One run of git: its exit code, output (at most OUTPUT_BYTES) and the head of stderr."""

    code: int
    stdout: bytes
    stderr: str
    truncated: bool


class Git:
    """git on the repository at the workspace's root."""

    def __init__(self, root: Path, jail: WorkerJail | None = None) -> None:
        self.root = root
        self.jail = jail or WorkerJail()

    def is_repository(self) -> bool:
        """Whether the workspace's root holds a `.git` folder of its own (not a file or link)."""
        try:
            mode = os.lstat(self.root / ".git").st_mode
        except OSError:
            return False
        return stat.S_ISDIR(mode)

    def run(
        self, args: Sequence[str], *, check: bool = True, env: dict[str, str] | None = None
    ) -> GitResult:
        """Run `git ARGS` hardened (with `env` added); a failure raises GitError unless `check`
        is false."""
        if not self.is_repository():
            raise GitError("The workspace is not a git repository (no .git folder at its root).")
        if os.path.lexists(self.root / ".git" / "commondir"):
            raise GitError("The workspace's .git names another repository's folder (commondir).")
        overrides = {**HARDENED, **self._emptied_filters()}
        result = self._run(args, overrides, env)
        if check and result.code != 0:
            raise GitError(f"git {args[0]} failed: {result.stderr.strip() or result.code}")
        return result

    def check_writes(self) -> None:
        """Refuse a change to the repository where git would run unconfined as root."""
        if self.jail.bubblewrap is None and os.geteuid() == 0:
            raise GitError(UNCONFINED_WRITES)

    def identity(self) -> dict[str, str]:
        """GIT_AUTHOR_* and GIT_COMMITTER_* for a commit when the repository names nobody."""
        name = self._config_value("user.name") or FALLBACK_NAME
        email = self._config_value("user.email") or FALLBACK_EMAIL
        return {
            "GIT_AUTHOR_NAME": name,
            "GIT_AUTHOR_EMAIL": email,
            "GIT_COMMITTER_NAME": name,
            "GIT_COMMITTER_EMAIL": email,
        }

    def _config_value(self, key: str) -> str:
        found = self._run(["config", "--get", key], HARDENED)
        return found.stdout.decode("utf-8", "replace").strip() if found.code == 0 else ""

    def _emptied_filters(self) -> dict[str, str]:
        """Every filter driver the config (with what it includes) names, switched off."""
        found = self._run(
            ["config", "--null", "--name-only", "--get-regexp", r"^filter\."], HARDENED
        )
        overrides: dict[str, str] = {}
        for key in found.stdout.decode("utf-8", "replace").split("\0"):
            name = key[len("filter.") :].rpartition(".")[0]
            if name:
                overrides.update({f"filter.{name}.{part}": "" for part in FILTER_KEYS})
                overrides[f"filter.{name}.required"] = "false"
        return overrides

    def _run(
        self, args: Sequence[str], overrides: dict[str, str], env: dict[str, str] | None = None
    ) -> GitResult:
        argv = ["git", "--no-pager", "--no-optional-locks", *args]
        seccomp_fd = seccomp_pipe(self.jail.seccomp) if self.jail.bubblewrap else None
        try:
            if self.jail.bubblewrap is not None:
                wrap = dataclasses.replace(self.jail.bubblewrap, cut_network=True, visible=())
                argv = [*wrap.args(self.root, self.root, seccomp_fd), "--", *argv]
            fds = () if seccomp_fd is None else (seccomp_fd,)
            return _bounded(argv, {**self._environment(overrides), **(env or {})}, self.root, fds)
        finally:
            if seccomp_fd is not None:
                os.close(seccomp_fd)

    def _environment(self, overrides: dict[str, str]) -> dict[str, str]:
        env = {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "HOME": "/nonexistent",
            "GIT_DIR": str(self.root / ".git"),
            "GIT_WORK_TREE": str(self.root),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": "/dev/null",
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_OPTIONAL_LOCKS": "0",
            "GIT_PAGER": "cat",
            "GIT_EDITOR": "true",
            "GIT_ATTR_NOSYSTEM": "1",
            "GIT_NO_REPLACE_OBJECTS": "1",
            "GIT_CONFIG_COUNT": str(len(overrides)),
        }
        for n, (key, value) in enumerate(overrides.items()):
            env[f"GIT_CONFIG_KEY_{n}"] = key
            env[f"GIT_CONFIG_VALUE_{n}"] = value
        return env


def _bounded(argv: list[str], env: dict[str, str], cwd: Path, fds: tuple[int, ...]) -> GitResult:
    """Run `argv`, keeping at most OUTPUT_BYTES of its output; killed after GIT_SECONDS."""
    with tempfile.TemporaryFile() as errors:
        child = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=errors,
            cwd=cwd,
            env=env,
            pass_fds=fds,
            start_new_session=True,
        )
        with killed_after(child, GIT_SECONDS) as overdue:
            assert child.stdout is not None
            out = child.stdout.read(OUTPUT_BYTES + 1)
            truncated = len(out) > OUTPUT_BYTES
            if truncated:
                child.kill()
            child.stdout.close()
            code = child.wait()
        errors.seek(0)
        message = errors.read(ERROR_BYTES).decode("utf-8", "replace")
    if overdue.is_set():
        message = f"git was stopped after {GIT_SECONDS:.0f} s"
    return GitResult(code, out[:OUTPUT_BYTES], message, truncated)
