"""MCP servers to connect to, read from `mcpServers` JSON files (the Claude Desktop / Cline
format): the user's `DATA_DIR/mcp.json` (or AGENT_MCP_CONFIG) and, when trusted, the
workspace's `.mcp.json`. A bad file or entry is reported with its file; the others load.

The workspace's `.mcp.json` is the agent's to write: its servers start only under
AGENT_MCP_TRUST_WORKSPACE. A server of the user's file (which the start refuses to find in the
workspace, utils/settings.py) may not run from the workspace (a `cwd` there)."""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError, model_validator

from modules.mcp.launch import within
from modules.results import ToolError
from modules.workspace.safe_fs import SafeRoot
from utils.validation import describe_validation_error

WORKSPACE_FILE_BYTES = 256 * 1024  # the workspace's .mcp.json; far more than servers take
TOOL_NAME_LIMIT = 64  # what OpenAI-compatible APIs accept as a function name
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
Transport = Literal["stdio", "http", "sse"]
_TRANSPORTS: dict[str, Transport] = {
    "stdio": "stdio",
    "http": "http",
    "streamable-http": "http",
    "streamable_http": "http",
    "streamablehttp": "http",
    "sse": "sse",
}


class ServerEntry(BaseModel):
    """One `mcpServers` entry: a command (stdio) or a URL (streamable HTTP, or SSE)."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    transport: Transport = Field(
        "stdio", validation_alias=AliasChoices("transport", "type", "transportType")
    )
    disabled: bool = False
    allowed_tools: list[str] | None = Field(
        None,
        validation_alias=AliasChoices("allowed_tools", "allowedTools"),
        description="names or globs of the server's tools to offer (default: all)",
    )
    always_allow: list[str] = Field(
        default_factory=list,
        validation_alias=AliasChoices("always_allow", "alwaysAllow"),
        description="tools that run without asking in `ask` mode",
    )
    timeout: float = Field(60.0, gt=0, le=3600, description="seconds a call may take")

    @model_validator(mode="before")
    @classmethod
    def _transport(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        given = data.get("transport") or data.get("type") or data.get("transportType")
        if given is None:
            given = "http" if "url" in data and "command" not in data else "stdio"
        kind = _TRANSPORTS.get(str(given).lower())
        if kind is None:
            raise ValueError(f"unknown transport {given!r}: use stdio, http or sse")
        rest = {k: v for k, v in data.items() if k not in ("transport", "type", "transportType")}
        return {**rest, "transport": kind}

    @model_validator(mode="after")
    def _target(self) -> ServerEntry:
        if self.transport == "stdio" and not self.command:
            raise ValueError("a stdio server needs `command`")
        if self.transport != "stdio" and not self.url:
            raise ValueError(f"an {self.transport} server needs `url`")
        if self.url and not self.url.startswith(("http://", "https://")):
            raise ValueError("`url` must start with http:// or https://")
        return self


@dataclass(frozen=True)
class ServerConfig:
    """A server as configured, its `${VAR}` references expanded, or why it cannot start."""

    name: str
    source: str  # the file it came from
    entry: ServerEntry | None
    problem: str | None = None  # set when entry is None, or when it may not start
    from_workspace: bool = False  # from the workspace's .mcp.json (started only when trusted)

    @property
    def enabled(self) -> bool:
        return self.entry is not None and self.problem is None and not self.entry.disabled

    def working_folder(self) -> Path | None:
        """The folder the entry's `cwd` names (a relative one from its file's), if it names one."""
        if self.entry is None or not self.entry.cwd:
            return None
        return (Path(self.source).parent / Path(self.entry.cwd).expanduser()).absolute()


@dataclass
class McpConfig:
    servers: dict[str, ServerConfig] = field(default_factory=dict)
    problems: list[dict[str, str]] = field(default_factory=list)  # files that did not load


def load_config(user_file: Path, workspace_file: Path, *, trust_workspace: bool) -> McpConfig:
    """The servers of the workspace's `.mcp.json` (`workspace_file`, in the workspace's top
    folder), then of the user's file, which wins on a name both define. The workspace's are
    listed but not started unless trusted."""
    config = McpConfig()
    workspace = workspace_file.parent
    untrusted = (
        f"not started: {workspace_file} lies in the workspace, which tasks can write, and its "
        "servers run commands outside the sandbox; set AGENT_MCP_TRUST_WORKSPACE=true to start "
        "them"
    )
    text = _workspace_text(workspace_file, config)
    if text is not None:
        problem = None if trust_workspace else untrusted
        _read_file(workspace_file, text, config, workspace, problem, from_workspace=True)
    if user_file.is_file():
        try:
            text = user_file.read_bytes()
        except OSError as exc:
            config.problems.append({"path": str(user_file), "message": f"cannot read it: {exc}"})
        else:
            _read_file(user_file, text, config, workspace, None, from_workspace=False)
    return config


def _workspace_text(path: Path, config: McpConfig) -> bytes | None:
    """The workspace's `.mcp.json` (None when there is none): a task may have written it, so it
    is read through the workspace's own walk, only as a regular file, never blocking, and not
    past WORKSPACE_FILE_BYTES."""
    try:
        workspace = SafeRoot(path.parent)
        info = workspace.lstat(path.name, follow=True)
        if info is None:
            return None
        with workspace.open_regular(path.name, str(path)) as (handle, _):
            text = handle.read(WORKSPACE_FILE_BYTES + 1)
    except (OSError, ToolError) as exc:
        config.problems.append({"path": str(path), "message": f"cannot read it: {exc}"})
        return None
    if len(text) > WORKSPACE_FILE_BYTES:
        too_large = f"not read: it is over {WORKSPACE_FILE_BYTES // 1024} KB"
        config.problems.append({"path": str(path), "message": too_large})
        return None
    return text


def _read_file(
    path: Path,
    text: bytes,
    config: McpConfig,
    workspace: Path,
    problem: str | None,
    *,
    from_workspace: bool,
) -> None:
    try:
        data = json.loads(text.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        config.problems.append({"path": str(path), "message": f"cannot read it: {exc}"})
        return
    servers = data.get("mcpServers") if isinstance(data, dict) else None
    if not isinstance(servers, dict):
        config.problems.append({"path": str(path), "message": "no `mcpServers` object"})
        return
    for name, raw in servers.items():
        server = _server(name, str(path), raw, problem, from_workspace)
        config.servers[name] = _kept_out_of(workspace, server)


def _server(
    name: str, source: str, raw: Any, problem: str | None, from_workspace: bool
) -> ServerConfig:
    try:
        entry = ServerEntry.model_validate(expanded(raw))
    except ValidationError as exc:
        return ServerConfig(
            name, source, None, f"bad entry in {source}: {describe_validation_error(exc, name)}"
        )
    except KeyError as exc:
        return ServerConfig(name, source, None, f"{source}: {exc.args[0]}")
    return ServerConfig(name, source, entry, problem, from_workspace)


def _kept_out_of(workspace: Path, server: ServerConfig) -> ServerConfig:
    """The server, not started when its `cwd` lies in the workspace: npx, uvx, `python -m` and
    a relative command would run what a task put there. A trusted workspace file's may."""
    folder = server.working_folder()
    if server.problem or server.from_workspace or folder is None or not within(folder, workspace):
        return server
    problem = (
        f"not started: its cwd {folder} lies in the workspace, where a task could put the code "
        "it runs; leave `cwd` out (it then runs in a folder of its own) or name one outside"
    )
    return replace(server, problem=problem)


def expanded(value: Any) -> Any:
    """`${VAR}` and `${VAR:-default}` in every string replaced from the environment."""
    if isinstance(value, str):
        return _VARIABLE.sub(_variable, value)
    if isinstance(value, list):
        return [expanded(v) for v in value]
    if isinstance(value, dict):
        return {k: expanded(v) for k, v in value.items()}
    return value


def _variable(match: re.Match[str]) -> str:
    name, default = match.group(1), match.group(2)
    value = os.environ.get(name, default)
    if value is None:
        raise KeyError(f"uses ${{{name}}}, which is not set in the environment")
    return value


def tool_name(server: str, tool: str) -> str:
    """`mcp__SERVER__TOOL`: stable, at most 64 characters of [A-Za-z0-9_-]; a name that had
    to be cleaned or shortened ends with a hash of the original pair, so none collide."""
    plain = f"mcp__{server}__{tool}"
    cleaned = _UNSAFE.sub("_", plain)
    if cleaned == plain and len(plain) <= TOOL_NAME_LIMIT:
        return plain
    digest = hashlib.sha256(f"{server}\0{tool}".encode()).hexdigest()[:8]
    return f"{cleaned[: TOOL_NAME_LIMIT - 9]}_{digest}"
