"""`get_settings` and `set_settings` (docs/protocol.md §4.1): the page's settings panel on the
user's own settings (core/settings_editor.py). Only a client with the server's token reaches
them, as every op; the agent's tools never do."""

from __future__ import annotations

from typing import Any

from flask_socketio import SocketIO

from core.settings_editor import SettingsEditor, SettingsRefused
from protocol.errors import failure
from protocol.requests import Empty, SetSettings
from web.handlers import acked
from web.state import WebState


def register_settings_handlers(socketio: SocketIO, state: WebState) -> None:
    """The two settings ops, on one editor for this server process."""
    editor = SettingsEditor(state.services)

    @socketio.on("get_settings")
    @acked(Empty)
    def on_get_settings(msg: Empty) -> dict[str, Any]:
        return {"ok": True, **editor.view()}

    @socketio.on("set_settings")
    @acked(SetSettings)
    def on_set_settings(msg: SetSettings) -> dict[str, Any]:
        try:
            return {"ok": True, **editor.update(msg.settings)}
        except SettingsRefused as exc:
            ack = failure("invalid", str(exc))
            ack["error"]["fields"] = exc.fields
            return ack
