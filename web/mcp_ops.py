"""Socket.IO handlers of the MCP panel: add a server, turn one off or on, remove one (each a
change to the user's MCP file, never to the workspace's), restart one (docs/protocol.md §10)."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Annotated, Any, Literal

from flask_socketio import SocketIO
from pydantic import BaseModel, Field, StringConstraints, model_validator

from web.handlers import acked, failure
from web.state import WebState

UserFile = ModuleType  # modules.mcp.user_file, imported when first used

ServerName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")]
Text = Annotated[str, Field(min_length=1, max_length=4096)]
Variables = Annotated[
    dict[
        Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_-]{0,127}$")],
        Annotated[str, Field(max_length=8192)],
    ],
    Field(max_length=100),
]


class ServerRef(BaseModel):
    name: Annotated[str, Field(min_length=1, max_length=200)]


class SetEnabled(ServerRef):
    enabled: bool


class AddServer(BaseModel):
    """A stdio server (`command`, `args`, `env`) or a remote one (`url`, `transport`, `headers`)."""

    name: ServerName
    command: Text | None = None
    args: Annotated[list[Annotated[str, Field(max_length=4096)]], Field(max_length=100)] = []
    env: Variables = {}
    url: Annotated[str, Field(pattern=r"^https?://", max_length=4096)] | None = None
    transport: Literal["http", "sse"] = "http"
    headers: Variables = {}

    @model_validator(mode="after")
    def _one_target(self) -> AddServer:
        if (self.command is None) == (self.url is None):
            raise ValueError("give either `command` (a local server) or `url` (a remote one)")
        if self.url is None and self.headers:
            raise ValueError("`headers` go with a `url`; a command gets `env`")
        if self.command is None and (self.args or self.env):
            raise ValueError("`args` and `env` go with a `command`; a URL gets `headers`")
        return self

    def entry(self) -> dict[str, Any]:
        """The `mcpServers` entry, as the user typed it."""
        if self.command is not None:
            return {
                "command": self.command,
                **({"args": self.args} if self.args else {}),
                **({"env": self.env} if self.env else {}),
            }
        return {
            "type": self.transport,
            "url": self.url,
            **({"headers": self.headers} if self.headers else {}),
        }


def register_mcp_handlers(socketio: SocketIO, state: WebState) -> None:
    """The MCP code is loaded at the first change, as at start only when a file names servers."""
    services, settings = state.services, state.settings
    user_file, _ = settings.mcp_files()

    def changed(edit: Callable[[UserFile], None]) -> dict[str, Any]:
        """Make the change to the user's file, then run what the files now say."""
        from modules.mcp import user_file as editor
        from modules.mcp.client import read_config

        try:
            edit(editor)
        except editor.EditRefused as exc:
            return failure(exc.code, str(exc))
        manager = services.mcp_servers()
        manager.apply(read_config(settings))
        return {"ok": True, "mcp": manager.status()}

    def own(name: str) -> dict[str, Any] | None:
        """Refused unless `name` is a server of the user's file (the one file the page writes)."""
        server = services.mcp.servers.get(name) if services.mcp else None
        if server is None:
            return failure("not_found", f"no MCP server named {name}")
        if server.config.source != str(user_file):
            return failure(
                "invalid",
                f"{name} comes from {server.config.source}; the page changes only {user_file}, "
                "edit that file by hand",
            )
        return None

    @socketio.on("mcp_add_server")
    @acked(AddServer)
    def on_add(msg: AddServer) -> dict[str, Any]:
        if services.mcp and msg.name in services.mcp.servers:
            source = services.mcp.servers[msg.name].config.source
            return failure("conflict", f"an MCP server named {msg.name} exists ({source})")
        if msg.command is not None and (refused := _launch_refusal(msg)) is not None:
            return failure("invalid", refused)
        return changed(lambda edit: edit.add_server(user_file, msg.name, msg.entry()))

    def _launch_refusal(msg: AddServer) -> str | None:
        """Why the server's command would not start, found as its start finds it: on the
        servers' PATH (no workspace folder on it), a relative one from its own folder."""
        from modules.mcp.launch import (
            LaunchRefused,
            ServerFolders,
            find_command,
            server_environment,
        )

        folder = ServerFolders(settings.data_dir).path(msg.name)
        env = server_environment(settings.workspace, folder) | msg.env
        try:
            find_command(msg.command or "", folder, env, settings.workspace)
        except (FileNotFoundError, LaunchRefused) as exc:
            return str(exc)
        return None

    @socketio.on("mcp_set_enabled")
    @acked(SetEnabled)
    def on_set_enabled(msg: SetEnabled) -> dict[str, Any]:
        refused = own(msg.name)
        return refused or changed(
            lambda edit: edit.set_disabled(user_file, msg.name, not msg.enabled)
        )

    @socketio.on("mcp_remove_server")
    @acked(ServerRef)
    def on_remove(msg: ServerRef) -> dict[str, Any]:
        refused = own(msg.name)
        return refused or changed(lambda edit: edit.remove_server(user_file, msg.name))

    @socketio.on("mcp_restart_server")
    @acked(ServerRef)
    def on_restart(msg: ServerRef) -> dict[str, Any]:
        manager = services.mcp
        server = manager.servers.get(msg.name) if manager else None
        if manager is None or server is None:
            return failure("not_found", f"no MCP server named {msg.name}")
        if server.state == "disabled":
            return failure("invalid", f"{msg.name} is disabled: {server.error}")
        manager.restart(msg.name)
        return {"ok": True, "mcp": manager.status()}
