"""Socket.IO handlers of the MCP panel: add a server, turn one off or on, remove one (each a
change to the user's MCP file, never to the workspace's), restart one (docs/protocol.md §10)."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

from flask_socketio import SocketIO

from protocol.errors import failure
from protocol.requests import AddServer, ServerRef, SetEnabled
from web.handlers import acked
from web.state import WebState

UserFile = ModuleType  # modules.mcp.user_file, imported when first used


def register_mcp_handlers(socketio: SocketIO, state: WebState) -> None:
    """The MCP code is loaded at the first change, as at start only when a file names servers."""
    services, settings = state.services, state.settings
    user_file, _ = settings.mcp_files()

    def changed(edit: Callable[[UserFile], None]) -> dict[str, Any]:
        """Make the change to the user's file (EditRefused carries its code), then run what the
        files now say."""
        from modules.mcp import user_file as editor
        from modules.mcp.client import read_config

        edit(editor)
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
        if manager is None:
            return failure("not_found", f"no MCP server named {msg.name}")
        manager.restart(msg.name)  # NotFound, or Invalid for one turned off
        return {"ok": True, "mcp": manager.status()}
