"""The app proxy: a port a conversation's process listens on inside its sandbox session,
offered to the browser on a port (an origin) of its own, behind a token scoped to that app
(docs/protocol.md §3)."""

from web.app_proxy.apps import AppNotOpen, AppProxy, OpenedApp

__all__ = ["AppNotOpen", "AppProxy", "OpenedApp"]
