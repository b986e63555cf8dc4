"""What the web workspace's HTTP routes and Socket.IO handlers share: one WebState per app."""

from __future__ import annotations

import hmac
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from flask_socketio import SocketIO

from core.services import AgentServices
from modules.workspace.file_watcher import WorkspaceWatcher
from protocol.event_values import FileChange, FolderRefresh
from protocol.events import Event, FileTree, Notice
from utils.settings import Settings
from web.access import LoginThrottle
from web.hub import TerminalHub
from web.transport import Transport
from web.transport.delta_batcher import batched_room

AsyncMode = Literal["threading", "eventlet"]
TREE_STOPPED = "live_tree_stopped"  # the notice that live file-tree updates stopped


class EventTaps:
    """One more listener per conversation besides its room (an A2A task following its run).

    Plain dict operations, no lock: `publish` runs for every event the server sends.
    """

    def __init__(self) -> None:
        self._taps: dict[str, Callable[[Event], None]] = {}

    def subscribe(self, conversation_id: str, listener: Callable[[Event], None]) -> None:
        self._taps[conversation_id] = listener

    def unsubscribe(self, conversation_id: str, listener: Callable[[Event], None]) -> None:
        if self._taps.get(conversation_id) is listener:
            del self._taps[conversation_id]

    def publish(self, event: Event) -> None:
        listener = self._taps.get(event.conversation_id or "")
        if listener is not None:
            listener(event)


@dataclass
class WebState:
    """The app's services, its Socket.IO server, the terminals and the access token."""

    settings: Settings
    services: AgentServices
    socketio: SocketIO
    hub: TerminalHub
    token: str
    async_mode: AsyncMode
    transport: Transport
    watcher: WorkspaceWatcher | None = None
    tree_stopped: str | None = None  # why live file-tree updates stopped (the watcher ended)
    token_note: str | None = None  # said at start: the stored token was replaced or exposed
    stopping: bool = False
    throttle: LoginThrottle = field(init=False)
    taps: EventTaps = field(default_factory=EventTaps)
    closers: list[Callable[[], None]] = field(default_factory=list)  # run at shutdown
    # told each batch of workspace changes too (MCP over HTTP): (changes, refresh), any thread
    file_listeners: list[Callable[[list[dict[str, Any]], list[dict[str, Any]]], None]] = field(
        default_factory=list
    )
    batched: set[str] = field(default_factory=set)  # sids that asked for gathered deltas
    session_ops: object = None  # the process and terminal ops' SessionOps (web/session_ops.py)

    def __post_init__(self) -> None:
        self.throttle = LoginThrottle(self.settings.wrong_token_limit)

    def room_for(self, sid: str, conversation_id: str) -> str:
        """The conversation's room this client gets its events in (see DeltaBatcher)."""
        return batched_room(conversation_id) if sid in self.batched else conversation_id

    def token_ok(self, candidate: object) -> bool:
        """Constant-time check; any string is safe to pass (compare_digest refuses non-ASCII)."""
        if not isinstance(candidate, str):
            return False
        given = candidate.encode("utf-8", "surrogatepass")
        return hmac.compare_digest(given, self.token.encode("utf-8", "surrogatepass"))

    def start_watcher(self) -> None:
        """Push `file_tree` events to every client whenever the workspace changes."""

        def broadcast(changes: list[dict[str, Any]], refresh: list[dict[str, Any]]) -> None:
            folders = [FolderRefresh(**folder) for folder in refresh]
            event = FileTree([FileChange(**change) for change in changes], folders or None)
            self.socketio.emit(event.name, event.to_wire())
            for listener in self.file_listeners:
                listener(changes, refresh)
            self.socketio.sleep(0)

        def stopped(why: str) -> None:
            self.tree_stopped = (
                f"Live file-tree updates stopped: the workspace watcher ended ({why}). The file "
                "tree no longer follows changes; reload the page to see them."
            )
            notice = Notice(code=TREE_STOPPED, message=self.tree_stopped)
            # this process's clients: another process's watcher may still be running
            self.socketio.emit(notice.name, notice.to_wire(), ignore_queue=True)

        self.watcher = WorkspaceWatcher(
            self.services.workspace.root,
            on_changes=broadcast,
            start_background_task=self.socketio.start_background_task,
            on_stopped=stopped,
        )
        self.watcher.start()
