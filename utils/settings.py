"""The one settings object: the command line, the environment, the user's settings file
(DATA_DIR/settings.json), `.env`, then `config.yaml` (docs/protocol.md §2)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator

from protocol.budgets import Budget
from protocol.options import Approval, Mode
from utils.setting_sources import BadConfiguration, VariableReader, merged, read_dotenv, read_yaml
from utils.user_settings import (
    COMMAND_LINE,
    ENVIRONMENT,
    USER_FILE,
    SettingLayers,
    read_user_settings,
)
from utils.workspace_config import MCP_FILE

MIN_TOKEN_CHARS = 16
WRONG_TOKEN_LIMIT = 10  # wrong tokens from one address within a minute, then it waits
PROGRAM_DIR = Path(__file__).resolve().parent.parent

Provider = Literal["deepseek", "kimi", "qwen", "siliconflow", "openai", "custom", "demo"]
SandboxKind = Literal["auto", "local", "docker"]
SessionNetwork = Literal["off", "outbound"]

ENV_PREFIX = "AGENT_"
# Settings read from their provider's own variable rather than from AGENT_<FIELD>.
OWN_VARIABLES = {
    "deepseek_api_key": "DEEPSEEK_API_KEY",
    "moonshot_api_key": "MOONSHOT_API_KEY",
    "dashscope_api_key": "DASHSCOPE_API_KEY",
    "siliconflow_api_key": "SILICONFLOW_API_KEY",
    "openai_api_key": "OPENAI_API_KEY",
    "tavily_api_key": "TAVILY_API_KEY",
}


class DockerSettings(BaseModel):
    """The Docker sandbox (config.yaml `docker:`, or AGENT_DOCKER_<FIELD> in the environment)."""

    image: str = "python:3.11-slim"
    pool_size: int = Field(3, ge=0, le=32, description="warm containers kept ready")
    max_uses: int = Field(100, ge=1, description="commands a container runs before it is retired")
    memory: str = Field("512m", description="memory limit, Docker syntax (512m, 2g)")
    cpus: float = Field(1.0, gt=0)
    pids_limit: int = Field(256, ge=16)
    network: bool = Field(False, description="give containers a network")
    user: str | None = Field(
        None,
        description="uid:gid commands run as; default: the agent's own uid:gid, or when the agent "
        "runs as root the workspace owner's, or 1000:1000 when root owns the workspace",
    )
    python: str = Field("python", description="the image's Python, for run_python")
    tmp_size: str = Field("256m", description="size of the private tmpfs /tmp")
    file_size_mb: int = Field(1024, ge=1, description="largest file a command may write")


class LocalSandboxSettings(BaseModel):
    """Limits and confinement of local commands (config.yaml `local_sandbox:`, or
    AGENT_LOCAL_SANDBOX_<FIELD> in the environment)."""

    bubblewrap: bool = Field(True, description="confine commands with bwrap when it is installed")
    network: bool = Field(False, description="leave the network reachable from commands")
    cpu_seconds: int = Field(600, ge=1, description="CPU time per process")
    memory_mb: int = Field(2048, ge=64, description="address space per process")
    total_memory_mb: int = Field(
        1024,
        ge=64,
        description="memory of a command, all its processes and its /tmp together (as root, "
        "where a memory cgroup can be made)",
    )
    tmp_mb: int = Field(256, ge=1, description="size of a command's private /tmp (bubblewrap)")
    file_size_mb: int = Field(1024, ge=1, description="largest file a command may write")
    processes: int = Field(512, ge=16, description="processes and threads a command may add")
    visible: list[str] = Field(
        default_factory=list,
        description="host folders bubblewrap shows read-only besides /usr, /etc and Python's "
        "(a JSON list in AGENT_LOCAL_SANDBOX_VISIBLE)",
    )


class RemoteAgent(BaseModel):
    """An A2A agent the `call_agent` tool may call (config.yaml `remote_agents:`, or
    AGENT_REMOTE_AGENTS as a JSON list)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[A-Za-z0-9_-]{1,40}$", description="what the model calls it by")
    url: str = Field(
        pattern=r"^https?://", description="its base URL (where /.well-known/agent-card.json is)"
    )
    token: str | None = Field(None, description="sent as `Authorization: Bearer TOKEN`")
    description: str | None = Field(None, description="instead of the one on its Agent Card")
    timeout: float = Field(300.0, gt=0, le=3600, description="seconds a call may take")


class PriceSetting(BaseModel):
    """One model's price in the `prices` setting (config.yaml `prices:`, or AGENT_PRICES as a
    JSON object of model -> price)."""

    model_config = ConfigDict(extra="forbid")

    input: float = Field(ge=0, description="per million prompt tokens")
    output: float = Field(ge=0, description="per million completion tokens")
    cached_input: float | None = Field(
        None, ge=0, description="per million cached prompt tokens; default: the input price"
    )
    currency: str = Field("USD", pattern=r"^[A-Z]{3}$")


DEFAULT_PROVIDER: Provider = "deepseek"


class Settings(BaseModel):
    """Every setting the program reads, with its default.

    In the environment and `.env` a setting is AGENT_<FIELD> (or its provider's own variable),
    and only that: a `MODEL`, `MODE`, `WORKSPACE` or `API_KEY` set for other programs (CI
    servers set WORKSPACE) is none of ours. config.yaml takes the plain field names.
    """

    model_config = ConfigDict(extra="ignore", validate_default=True)
    _layers: SettingLayers | None = PrivateAttr(None)  # where load_settings read them

    provider: Provider = DEFAULT_PROVIDER
    base_url: str | None = None
    api_key: str | None = None
    model: str | None = None
    thinking_model: str | None = None
    context_window: int | None = None

    deepseek_api_key: str | None = None
    moonshot_api_key: str | None = None
    dashscope_api_key: str | None = None
    siliconflow_api_key: str | None = None
    openai_api_key: str | None = None
    tavily_api_key: str | None = None

    workspace: Path = Path("workspace")
    data_dir: Path = Path("data")
    mode: Mode = "fast"
    approval: Approval = "ask"
    default_agent: str = "general"
    sandbox: SandboxKind = "auto"
    docker: DockerSettings = Field(default_factory=DockerSettings)
    local_sandbox: LocalSandboxSettings = Field(default_factory=LocalSandboxSettings)

    web_token: str | None = None
    allowed_origins: list[str] = Field(default_factory=list)
    allowed_hosts: list[str] = Field(default_factory=list)
    log_redact_content: bool = False
    use_proxy: bool = False
    redis_url: str | None = Field(
        None,
        description="scale out: several web processes coordinated through this Redis",
    )
    a2a: bool = Field(False, description="serve A2A on its own port")
    a2a_port: int | None = Field(
        None,
        ge=1,
        le=65535,
        description="the A2A server's port; default: the web port + 1",
    )
    mcp_http: bool = Field(False, description="serve MCP over streamable HTTP on its own port")
    mcp_http_port: int | None = Field(
        None,
        ge=1,
        le=65535,
        description="the MCP HTTP server's port; default: the web port + 2",
    )
    remote_agents: list[RemoteAgent] = Field(default_factory=list)

    mcp_config: Path | None = Field(
        None,
        description="the MCP servers file (`mcpServers` JSON); default DATA_DIR/mcp.json",
    )
    mcp_trust_workspace: bool = Field(
        False,
        description="also start the servers of the workspace's .mcp.json (run unsandboxed)",
    )
    trust_workspace_agents: bool = Field(
        False,
        description="the workspace's .agents/ definitions may loosen the user's limits and "
        "replace the user's skills",
    )
    mcp_server_tools: list[str] = Field(
        default_factory=list,
        description="tools `main.py mcp` offers in `ask` mode besides the read-only ones",
    )

    max_iterations: int = Field(20, ge=1)
    # Budgets that stop a task before its next model call: '200k tokens', '$0.50', '3 CNY'.
    budget_task: Budget | None = Field(None, description="what one task may use")
    budget_conversation: Budget | None = Field(None, description="what one conversation may use")
    budget_day: Budget | None = Field(None, description="what all tasks of a day may use")
    condense_threshold: float = Field(
        0.8,
        ge=0,
        le=1,
        description="share of the context window at which older turns are summarised; 0: never",
    )
    command_timeout: float = Field(60.0, gt=0, le=600)
    session_idle_minutes: float = Field(
        30.0,
        gt=0,
        description="a conversation's sandbox session ends after this long with no command, "
        "no output and nobody attached (its background processes end with it)",
    )
    session_network: SessionNetwork = Field(
        "off",
        description="a sandbox session's network: off (its own loopback only) or outbound "
        "(out through a user-mode network stack, slirp4netns, or for Docker a bridge network "
        "of its own; never the host's loopback services)",
    )
    max_processes: int = Field(
        5, ge=1, le=50, description="background processes running at once in a conversation"
    )
    process_settle_seconds: float = Field(
        3.0,
        ge=0,
        le=30,
        description="how long starting a background process waits for its first output "
        "(less when it ends or listens on a port first)",
    )
    command_env: list[str] = Field(
        default_factory=list,
        description="names of variables of the server's environment that commands also get "
        "(a JSON list in AGENT_COMMAND_ENV); a secret's value never passes",
    )
    disk_floor_mb: int = Field(
        512,
        ge=0,
        description="free space kept on the workspace's and the data folder's file systems: "
        "a command is not started, or is stopped, when one has less than the larger of this "
        "and disk_floor_percent (both 0: no floor)",
    )
    disk_floor_percent: float = Field(
        0.0, ge=0, le=50, description="the same floor as a share of the file system's size"
    )
    tool_timeout: float = Field(120.0, gt=0)
    output_limit_chars: int = Field(20_000, ge=1_000)
    request_timeout: float = Field(120.0, gt=0)
    max_retries: int = Field(4, ge=0)
    retry_base_delay: float = Field(1.0, ge=0)
    demo_pace: float = Field(
        1.0,
        ge=0,
        le=10,
        description="the demo model's delays, scaled (0: none)",
    )

    client_queue_mb: float = Field(
        8.0,
        gt=0,
        description="what may wait to be sent to one web client before it is dropped "
        "(it reconnects and gets the rest)",
    )
    wrong_token_limit: int = Field(
        WRONG_TOKEN_LIMIT,
        ge=1,
        le=100_000,
        description="wrong tokens one address may send within a minute before it is told to "
        "wait (raise it only for a test rig that sends them on purpose, such as the A2A TCK); "
        "the right token is never throttled",
    )
    upload_limit_mb: float = Field(25, gt=0, le=1024)
    extract_timeout: float = Field(20.0, gt=0)
    extract_memory_mb: int = Field(1024, ge=256)
    attachment_chars: int = Field(40_000, ge=1_000)
    # None: what the provider preset knows about the model; true/false overrides it.
    vision: bool | None = None
    # None: the provider preset's rule for naming a required tool in `tool_choice`; true: on
    # every call that must get a tool call; false: never (a server that refuses the field).
    tool_choice: bool | None = None
    prices: dict[str, PriceSetting] = Field(
        default_factory=dict,
        description="model -> {input, cached_input, output, currency} per million tokens "
        "(a JSON object in AGENT_PRICES); over the built-in table, for any model",
    )

    @field_validator("web_token")
    @classmethod
    def _strong_token(cls, token: str | None) -> str | None:
        """The right token is never throttled (one address can be everyone's), so a short
        fixed one could be guessed."""
        if token is not None and len(token) < MIN_TOKEN_CHARS:
            raise ValueError(
                f"a fixed token needs at least {MIN_TOKEN_CHARS} characters, this one has "
                f"{len(token)} (leave AGENT_WEB_TOKEN unset for a random one)"
            )
        return token

    @field_validator("remote_agents")
    @classmethod
    def _unique_remote_names(cls, agents: list[RemoteAgent]) -> list[RemoteAgent]:
        names = [agent.name for agent in agents]
        if len(set(names)) != len(names):
            raise ValueError(f"remote agent names must be unique: {names}")
        return agents

    @property
    def layers(self) -> SettingLayers:
        """Where each value was read from; settings made in-process are the caller's."""
        if self._layers is not None:
            return self._layers
        return SettingLayers(((USER_FILE, {}), ("the caller", self.model_dump(exclude_unset=True))))

    def mcp_files(self) -> tuple[Path, Path]:
        """The user's MCP servers file and the workspace's (either may be missing)."""
        user = self.mcp_config.expanduser() if self.mcp_config else self.data_dir / "mcp.json"
        return user, self.workspace / MCP_FILE

    def secrets(self) -> list[str]:
        """Values that must never reach a tool's environment or a log."""
        values = [
            self.api_key,
            self.deepseek_api_key,
            self.moonshot_api_key,
            self.dashscope_api_key,
            self.siliconflow_api_key,
            self.openai_api_key,
            self.tavily_api_key,
            self.web_token,
            *(remote.token for remote in self.remote_agents),
        ]
        return [v for v in values if v]


def load_settings(**overrides: Any) -> Settings:
    """Build the settings once, from the current folder's `.env` and `config.yaml`, the user's
    settings file and the environment; command-line flags arrive as overrides and win over all."""
    variables = VariableReader(Settings, prefix=ENV_PREFIX, own_variables=OWN_VARIABLES)
    given = {k: v for k, v in overrides.items() if v is not None}
    environment = variables.read(os.environ, "the environment")
    # Where the files lie is checked before they are read (a task could have made one huge),
    # against the workspace the flags, the environment or the default name; and again once
    # the files said their own.
    named = merged(given, environment).get("workspace", Settings.model_fields["workspace"].default)
    workspace = Path(named).expanduser().resolve()
    _refuse_settings_files_in(workspace)
    layers = SettingLayers(
        (
            (COMMAND_LINE, given),
            (ENVIRONMENT, environment),
            (USER_FILE, {}),
            (".env", variables.read(read_dotenv(Path(".env")), ".env")),
            ("config.yaml", read_yaml(Path("config.yaml"), Settings.model_fields)),
        )
    )
    found = layers.merged(DEFAULT_PROVIDER)
    data_dir = Path(found.get("data_dir", Settings.model_fields["data_dir"].default))
    data_dir = data_dir.expanduser().resolve()
    if not data_dir.is_relative_to(workspace):  # else the start is refused below, unread
        layers = layers.with_user(read_user_settings(data_dir))
    settings = settings_of(layers)
    _refuse_code_in_workspace(settings)
    return settings


def settings_of(layers: SettingLayers) -> Settings:
    """The settings `layers` give, validated as at start (raises ValidationError)."""
    settings = Settings.model_validate(layers.merged(DEFAULT_PROVIDER))
    settings.workspace = settings.workspace.expanduser().resolve()
    settings.data_dir = settings.data_dir.expanduser().resolve()
    settings._layers = layers
    return settings


def _refuse_code_in_workspace(settings: Settings) -> None:
    """Commands write the workspace: it may hold neither the code the server runs, nor the
    settings files it reads at start, nor what it trusts as the user's own (the data folder:
    MCP servers, agents, skills, the token, the history), or one command would outlive its
    sandbox (docs/protocol.md §14)."""
    workspace = settings.workspace
    for what, path in (
        ("this program", PROGRAM_DIR),
        ("the Python it runs on", Path(sys.prefix).resolve()),
        ("the Python it runs on", Path(sys.base_prefix).resolve()),
    ):
        if path.is_relative_to(workspace):
            raise BadConfiguration(
                f"the workspace {workspace} holds {what} ({path}), which commands could then "
                "change: choose a folder that does not contain it"
            )
    mcp_file = settings.mcp_files()[0].resolve()
    for what, path, how in (
        ("the data folder", settings.data_dir, "--data-dir or AGENT_DATA_DIR"),
        ("the MCP servers file", mcp_file, "AGENT_MCP_CONFIG"),
    ):
        if path.is_relative_to(workspace):
            raise BadConfiguration(
                f"{what} {path} lies in the workspace {workspace}, where commands could "
                f"rewrite what the server trusts as yours: give {how} a place outside it"
            )
    _refuse_settings_files_in(workspace)


def _refuse_settings_files_in(workspace: Path) -> None:
    """The `.env` and `config.yaml` read at start may not lie in the workspace (nor be links
    into it): a command could write the settings of the next start there."""
    cwd = Path.cwd().resolve()
    read_here = [
        name
        for name in (".env", "config.yaml")
        if os.path.lexists(cwd / name)
        and (cwd.is_relative_to(workspace) or (cwd / name).resolve().is_relative_to(workspace))
    ]
    if read_here:
        raise BadConfiguration(
            f"{' and '.join(read_here)} in {cwd} lie in the workspace, where commands could "
            "rewrite the server's settings: move them out and start from another folder"
        )
