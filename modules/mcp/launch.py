"""Where and how a stdio MCP server starts: in a folder of its own outside the workspace, with
an environment that names no workspace path, its command found there or on that PATH.

The workspace is the agent's to write, and a server runs outside the sandbox: npx and uv look
for packages and configuration in their working folder and its parents, `python -m` imports
from it, a relative command is resolved against it, and a PATH entry in the workspace would
run what a task put there. So none of those may lie in the workspace.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path

from modules.sandbox.environment import base_environment

FOLDERS = "mcp-servers"  # DATA_DIR/mcp-servers/NAME
PRIVATE = 0o700

# Runs a stdio server with PR_SET_PDEATHSIG: the kernel kills it if this process dies without
# closing it (a crash, SIGKILL). The SDK spawns children itself and takes no preexec hook.
_ORPHAN_GUARD = (
    "import ctypes,os,signal,sys\n"
    "ctypes.CDLL(None).prctl(1,signal.SIGKILL)\n"
    "os.getppid()==int(sys.argv[1]) or os._exit(1)\n"
    "os.execvp(sys.argv[2],sys.argv[2:])\n"
)


class LaunchRefused(Exception):
    """A stdio server that would run from the workspace: it is not started."""


def within(path: Path | str, folder: Path) -> bool:
    """Whether `path`, links followed, is `folder` or lies beneath it."""
    real, folder = Path(os.path.realpath(path)), Path(os.path.realpath(folder))
    return real == folder or real.is_relative_to(folder)


def safe_name(name: str) -> str:
    """A file name for a server's name: the name itself when it is plain, else its plain
    characters and a hash of the whole (never `.` or `..`, never two names alike)."""
    cleaned = re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:100]
    if cleaned == name and not name.startswith("."):
        return name
    return f"{cleaned.lstrip('.')[:80]}-{hashlib.sha256(name.encode()).hexdigest()[:8]}"


class ServerFolders:
    """Each stdio server's own folder, DATA_DIR/mcp-servers/NAME, mode 0700, kept (a server
    may keep files there). The data folder never lies in the workspace: the start refuses it
    (utils/settings.py)."""

    def __init__(self, data_dir: Path) -> None:
        self.root = data_dir.absolute() / FOLDERS

    def path(self, name: str) -> Path:
        """Where the server's folder is (it may not be made yet)."""
        return self.root / safe_name(name)

    def folder(self, name: str) -> Path:
        """The server's folder, made if missing (on the manager's loop thread)."""
        self.root.mkdir(mode=PRIVATE, parents=True, exist_ok=True)
        folder = self.path(name)
        folder.mkdir(mode=PRIVATE, exist_ok=True)
        os.chmod(folder, PRIVATE)
        return folder


def server_environment(
    workspace: Path, home: Path, source: Mapping[str, str] = os.environ
) -> dict[str, str]:
    """The base environment with no workspace path in it: PATH without the entries that are
    empty, relative or in the workspace; another variable naming a workspace path emptied
    (the SDK would put back a missing one), HOME then the server's own folder."""
    env: dict[str, str] = {}
    for name, value in base_environment(source).items():
        parts = value.split(os.pathsep)
        if name == "PATH":
            kept = [part for part in parts if os.path.isabs(part) and not within(part, workspace)]
            value = os.pathsep.join(kept)
        elif any(os.path.isabs(part) and within(part, workspace) for part in parts):
            value = ""
        env[name] = value
    if not env.get("HOME"):
        env["HOME"] = str(home)
    return env


def find_command(
    command: str, folder: Path, env: Mapping[str, str], workspace: Path, *, trusted: bool = False
) -> str:
    """The program a stdio entry names: a path (relative ones from the server's folder, never
    the workspace) or a name looked up on `env`'s PATH; FileNotFoundError when there is none,
    LaunchRefused when it lies in the workspace (unless the entry is a trusted workspace file's).
    The page's check of a server it adds and the start both ask this."""
    path = env.get("PATH")
    found = shutil.which(str(folder / command) if os.sep in command else command, path=path)
    if found is None:
        raise FileNotFoundError(f"command not found: {command} (PATH: {path})")
    if within(found, workspace) and not trusted:
        raise LaunchRefused(f"its command {found} lies in the workspace, which tasks write")
    return found


def guarded(command: str, args: list[str]) -> tuple[str, list[str]]:
    """The argv that runs `command` under the orphan guard on Linux (as it is elsewhere): our
    Python with -I -S, so no site, and neither its folder nor PYTHON* variables reach imports."""
    if not sys.platform.startswith("linux"):
        return command, args
    return sys.executable, ["-I", "-S", "-c", _ORPHAN_GUARD, str(os.getpid()), command, *args]
