"""The apps of this server: a port a conversation's background process listens on, opened
through a listener of its own (AppListener) at the page's request, and closed when that
process ends, stops listening on the port, or its session ends (the session pool's events),
and when the server stops."""

from __future__ import annotations

import contextlib
import logging
import secrets
from collections.abc import Callable
from dataclasses import dataclass

from modules.sandbox.session.os_threads import original
from modules.sandbox.session.pool import SessionPool
from modules.sandbox.session.process import Port, ProcessEvent, ProcessInfo
from modules.sandbox.session.session import SandboxSession
from web.app_proxy.connection import Admission
from web.app_proxy.http_head import TOKEN_PARAM
from web.app_proxy.listener import AppKey, AppListener, bound_socket

log = logging.getLogger(__name__)

V6_LOOPBACK = "::1"
V4_LOOPBACK = "127.0.0.1"


class AppNotOpen(LookupError):
    """No process of the conversation listens on that port (or runs here at all)."""


@dataclass(frozen=True)
class OpenedApp:
    """An app's address for the page, the process and the port behind it."""

    url: str
    process_id: str
    port: int


class AppProxy:
    """Every open app of this server, keyed by (conversation, port)."""

    def __init__(self, pool: SessionPool, bind_host: str, host_ok: Callable[[str], bool]) -> None:
        self.pool = pool
        self.bind_host = bind_host
        self.host_ok = host_ok
        self._lock = original("threading").Lock()  # real: the sessions' OS threads take it
        self._apps: dict[AppKey, AppListener] = {}
        pool.listeners.append(self.on_event)

    def open(
        self, conversation_id: str, process_id: str | None, port: int | None, page_host: str
    ) -> OpenedApp:
        """Open (or find open) the app on `port` of process `process_id` (either may be left
        out); its URL on `page_host`, the name the page reached this server by."""
        session = self.pool.existing(conversation_id)
        if session is None:
            raise AppNotOpen("no process of this conversation runs in this server")
        info, port = _owner(session.processes(), process_id, port)
        key = AppKey(conversation_id, port)
        with self._lock:
            app = self._apps.get(key)
            if app is None or app.closed:
                app = self._listen(key, info.record.id, session)
                self._apps[key] = app
        if not _still_listening(session, info.record.id, port):  # it ended meanwhile
            self._close([app])
            raise AppNotOpen(f"{info.record.id} no longer listens on port {port}")
        url = f"http://{_url_host(page_host)}:{app.port}/?{TOKEN_PARAM}={app.admission.token}"
        return OpenedApp(url, info.record.id, port)

    def on_event(self, event: ProcessEvent) -> None:
        """A process ended or its ports changed: close the apps it no longer serves (called
        holding its session's lock: closing sockets does not wait)."""
        if event.phase not in ("exited", "ports"):
            return
        listening = set(event.info.ports) if event.phase == "ports" and event.info else set()
        with self._lock:
            gone = [
                app
                for key, app in self._apps.items()
                if key.conversation_id == event.conversation_id
                and app.process_id == event.process_id
                and key.port not in listening
            ]
        self._close(gone)

    def close(self) -> None:
        """The server stops: every app closes."""
        with contextlib.suppress(ValueError):
            self.pool.listeners.remove(self.on_event)
        with self._lock:
            apps = list(self._apps.values())
        self._close(apps)

    def _listen(self, key: AppKey, process_id: str, session: SandboxSession) -> AppListener:
        sock = bound_socket(self.bind_host)
        admission = Admission(int(sock.getsockname()[1]), secrets.token_urlsafe(24), self.host_ok)
        target = _target_host(session, key.port)
        log.info("an app opens", extra={"fields": {"conversation_id": key.conversation_id,
                 "port": key.port, "app_port": admission.app_port}})  # fmt: skip
        return AppListener(key, process_id, session, sock, admission, target)

    def _close(self, apps: list[AppListener]) -> None:
        for app in apps:
            app.close()
            with self._lock:
                if self._apps.get(app.key) is app:
                    del self._apps[app.key]


def _owner(
    listed: list[ProcessInfo], process_id: str | None, port: int | None
) -> tuple[ProcessInfo, int]:
    """The running process and the port the page asks for (its first port when only the
    process is named)."""
    running = [i for i in listed if i.record.running]
    if process_id is not None:
        found = next((i for i in running if i.record.id == process_id), None)
        if found is None:
            raise AppNotOpen(f"no running process {process_id} in this conversation")
        if port is None and found.ports:
            port = found.ports[0]
        if port is None or port not in found.ports:
            raise AppNotOpen(f"{process_id} does not listen on {port or 'any port'}")
        return found, port
    found = next((i for i in running if port in i.ports), None)
    if found is None or port is None:
        raise AppNotOpen(f"no process of this conversation listens on port {port}")
    return found, port


def _still_listening(session: SandboxSession, process_id: str, port: int) -> bool:
    return any(
        i.record.id == process_id and i.record.running and port in i.ports
        for i in session.processes()
    )


def _target_host(session: SandboxSession, port: int) -> str:
    """Where inside the session to connect: IPv4 loopback unless the app listens on IPv6
    only."""
    hosts = {p.host for p in _ports(session) if p.port == port}
    return V6_LOOPBACK if hosts and all(":" in h for h in hosts) else V4_LOOPBACK


def _ports(session: SandboxSession) -> list[Port]:
    try:
        return session.ports()
    except OSError:
        return []


def _url_host(name: str) -> str:
    return f"[{name}]" if ":" in name else name
