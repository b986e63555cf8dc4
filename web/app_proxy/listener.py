"""One app's listener: a port of its own on the web server's bind address (so the app is an
origin of its own), a thread accepting browser connections, a thread per connection serving
it; closing it refuses new connections and ends every open one."""

from __future__ import annotations

import contextlib
import functools
import logging
import socket
from dataclasses import dataclass
from typing import Any

from modules.sandbox.session.os_threads import original, start_thread
from modules.sandbox.session.session import SandboxSession
from web.app_proxy.connection import Admission, serve
from web.app_proxy.http_head import answer, page

log = logging.getLogger(__name__)

MAX_CONNECTIONS = 64  # browser connections open at once to one app
BACKLOG = 64
ACCEPT_RETRY_SECONDS = 0.05


@dataclass(frozen=True)
class AppKey:
    """An app: a port a conversation's process listens on inside its session."""

    conversation_id: str
    port: int


class AppListener:
    """The proxy's port for one app, and the connections through it."""

    def __init__(
        self,
        key: AppKey,
        process_id: str,
        session: SandboxSession,
        sock: Any,
        admission: Admission,
        target_host: str,
    ) -> None:
        self.key = key
        self.process_id = process_id
        self.session = session
        self.admission = admission
        self._sock = sock
        self._target_host = target_host  # where the app listens: 127.0.0.1 or ::1
        self._lock = original("threading").Lock()
        self._open: set[Any] = set()  # browser sockets being served
        self.closed = False
        start_thread(self._accept, f"app-proxy-{key.port}")

    @property
    def port(self) -> int:
        """The proxy's port: the app's origin."""
        return int(self._sock.getsockname()[1])

    def close(self) -> None:
        """Stop listening and end every connection (their threads finish by themselves)."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
            connections = list(self._open)
        for sock in [self._sock, *connections]:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()

    def _accept(self) -> None:
        while not self.closed:
            try:
                browser, _ = self._sock.accept()
            except OSError:
                if self.closed:
                    return
                original("time").sleep(ACCEPT_RETRY_SECONDS)  # out of descriptors: a moment
                continue
            browser.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                full = len(self._open) >= MAX_CONNECTIONS
                if not (full or self.closed):
                    self._open.add(browser)
            if full or self.closed:
                self._refuse(browser)
                continue
            start_thread(functools.partial(self._serve, browser), f"app-proxy-{self.key.port}-conn")

    def _serve(self, browser: Any) -> None:
        try:
            with self.session.attached():
                serve(browser, self.admission, self._connect)
        except Exception:  # one connection's trouble must not reach the others
            log.exception("an app connection failed")
        finally:
            with self._lock:
                self._open.discard(browser)
            browser.close()

    def _connect(self) -> Any:
        app = self.session.connect(self.key.port, self._target_host)
        app.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return app

    @staticmethod
    def _refuse(browser: Any) -> None:
        text = page("Too many connections", "This app has as many connections open as it may.")
        with contextlib.suppress(OSError):
            browser.sendall(answer("503 Service Unavailable", text))
        browser.close()


def bound_socket(bind_host: str) -> Any:
    """A listening socket on an OS-assigned port of `bind_host` (the web server's)."""
    real = original("socket")
    host = bind_host.strip("[]")
    infos = real.getaddrinfo(host, 0, type=real.SOCK_STREAM, flags=real.AI_PASSIVE)
    family, _, _, _, address = infos[0]
    sock = real.socket(family, real.SOCK_STREAM)
    try:
        sock.setsockopt(real.SOL_SOCKET, real.SO_REUSEADDR, 1)
        if family == real.AF_INET6 and host == "::":
            sock.setsockopt(real.IPPROTO_IPV6, real.IPV6_V6ONLY, 0)
        sock.bind(address)
        sock.listen(BACKLOG)
    except OSError:
        sock.close()
        raise
    return sock
