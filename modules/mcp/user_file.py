"""Changes to the user's MCP servers file made from the page: add a server, turn one off or on,
remove one. Only the user's file is written, never the workspace's `.mcp.json` (whose servers
start only when AGENT_MCP_TRUST_WORKSPACE says so); an entry is written as it was given, its
`${VAR}` references unexpanded, and the file is kept private (it may hold keys in `env`)."""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from modules.mcp.config import ServerEntry, expanded
from protocol.errors import ErrorCode
from utils.errors import AgentError
from utils.files import atomic_write, directory_lock
from utils.validation import describe_validation_error

_lock = threading.Lock()  # one change at a time: each reads the file, changes it, writes it


class EditRefused(AgentError):
    """A change that was not made; `code` is the ack's error code (docs/protocol.md §4.4)."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


def add_server(path: Path, name: str, entry: dict[str, Any]) -> None:
    """Add `name` with `entry` (refused when the name is taken or the entry is not valid)."""
    try:
        ServerEntry.model_validate(expanded(entry))
    except ValidationError as exc:
        raise EditRefused("invalid", describe_validation_error(exc, name)) from None
    except KeyError as exc:
        raise EditRefused("invalid", f"{name}: {exc.args[0]}") from None
    with _locked(path):
        data, servers = _read(path)
        if name in servers:
            raise EditRefused("conflict", f"{path} already has a server named {name}")
        servers[name] = entry
        _write(path, data)


def set_disabled(path: Path, name: str, disabled: bool) -> None:
    """Turn a server of the file off (`"disabled": true`) or on again."""
    with _locked(path):
        data, servers = _read(path)
        entry = _entry(path, servers, name)
        if disabled:
            entry["disabled"] = True
        else:
            entry.pop("disabled", None)
        _write(path, data)


def remove_server(path: Path, name: str) -> None:
    with _locked(path):
        data, servers = _read(path)
        _entry(path, servers, name)
        del servers[name]
        _write(path, data)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Against the other threads, and the other server processes sharing the data folder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with _lock, directory_lock(path.parent):
        yield


def _read(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """The file's whole object and its `mcpServers` (both changed in place); a file that
    cannot be read is refused, never replaced."""
    if not path.exists():
        data: dict[str, Any] = {"mcpServers": {}}
        return data, data["mcpServers"]
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise EditRefused("invalid", f"{path} cannot be read ({exc}); fix it by hand") from None
    if not isinstance(data, dict):
        raise EditRefused("invalid", f"{path} does not hold a JSON object; fix it by hand")
    servers = data.setdefault("mcpServers", {})
    if not isinstance(servers, dict):
        raise EditRefused("invalid", f"`mcpServers` in {path} is not an object; fix it by hand")
    return data, servers


def _entry(path: Path, servers: dict[str, Any], name: str) -> dict[str, Any]:
    entry = servers.get(name)
    if entry is None:
        raise EditRefused("not_found", f"{path} has no server named {name}")
    if not isinstance(entry, dict):
        raise EditRefused("invalid", f"the entry of {name} in {path} is not an object")
    return entry


def _write(path: Path, data: dict[str, Any]) -> None:
    """Replace the file whole, readable by its owner only before anything is written."""
    created = not path.exists()
    if created:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600))
    else:
        os.chmod(path, 0o600)
    try:
        atomic_write(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    except BaseException:
        if created:
            path.unlink(missing_ok=True)
        raise
