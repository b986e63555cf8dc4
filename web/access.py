"""Who may reach the web workspace: the Host it is asked as, the Origin of a socket or of a
state-changing request, and the throttle on wrong tokens (docs/protocol.md §3)."""

from __future__ import annotations

import ipaddress
import json
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from utils.text import shown

log = logging.getLogger(__name__)

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]
OriginCheck = Callable[[str | None, dict[str, Any]], bool]
FAILED_LOGIN_WINDOW_SECONDS = 60.0
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
OTHER_SITES = frozenset({"cross-site", "same-site"})  # Sec-Fetch-Site: not this very origin


def is_loopback(host: str) -> bool:
    """Whether a host name or address means this machine only."""
    name = host.strip("[]").lower().rstrip(".")
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def host_name(header: str) -> str:
    """The name of a Host header without its port: `[::1]:5000` -> `::1`."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1 : header.find("]")] if "]" in header else header
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


class HostGuard:
    """WSGI middleware in front of everything, Socket.IO included: a request must name this
    server as a loopback host or as one of `allowed` (AGENT_ALLOWED_HOSTS). Bound to another
    address with no list given, any name goes (the operator chose to publish it). A
    DNS-rebinding page names its own domain, so it is refused with 403."""

    def __init__(self, app: WsgiApp, *, bind_host: str, allowed: list[str]) -> None:
        self.app = app
        self.allowed = {host_name(name) for name in allowed}
        self.any_name = not self.allowed and not is_loopback(bind_host)

    def accepts(self, host_header: str) -> bool:
        name = host_name(host_header)
        return self.any_name or is_loopback(name) or name in self.allowed

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        header = environ.get("HTTP_HOST") or environ.get("SERVER_NAME", "")
        if self.accepts(header):
            return self.app(environ, start_response)
        log.warning(
            "request refused: unknown Host",
            extra={"fields": {"host": shown(header), "remote": environ.get("REMOTE_ADDR")}},
        )
        return _forbidden(
            start_response,
            "forbidden_host",
            "this server answers only to the host names it is configured for",
        )


class OriginGuard:
    """WSGI middleware: every request but GET, HEAD and OPTIONS, to any path, must pass the
    Origin check of the Socket.IO handshake, else 403. The browser sends the cookie along
    from a page on another port of this host (the same site), so a page elsewhere could
    otherwise upload into the workspace as the user."""

    def __init__(self, app: WsgiApp, origin_allowed: OriginCheck) -> None:
        self.app = app
        self.origin_allowed = origin_allowed

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        method = environ.get("REQUEST_METHOD", "GET").upper()
        if method in SAFE_METHODS or self.origin_allowed(environ.get("HTTP_ORIGIN"), environ):
            return self.app(environ, start_response)
        return _forbidden(
            start_response,
            "forbidden_origin",
            "a request that changes something must come from this server's own page "
            "or from an origin in AGENT_ALLOWED_ORIGINS",
        )


def _forbidden(start_response: Callable[..., Any], code: str, message: str) -> list[bytes]:
    body = json.dumps({"ok": False, "error": {"code": code, "message": message}}).encode()
    start_response(
        "403 FORBIDDEN",
        [("Content-Type", "application/json"), ("Content-Length", str(len(body)))],
    )
    return [body]


def _normal_origin(origin: str) -> str:
    return origin.strip().rstrip("/").lower()


def origin_checker(allowed: list[str]) -> OriginCheck:
    """Accept no Origin (not a browser), the server's own, or one in AGENT_ALLOWED_ORIGINS.

    The server's own origin comes from the Host header, which HostGuard has checked. `null`
    (a sandboxed frame, a file, a redirect) is foreign, and so is a request the browser
    marks `Sec-Fetch-Site: cross-site` or `same-site` unless its Origin is a listed one.
    """
    extra = {_normal_origin(o) for o in allowed} - {"null"}

    def origin_allowed(origin: str | None, environ: dict[str, Any]) -> bool:
        other_site = environ.get("HTTP_SEC_FETCH_SITE", "").strip().lower() in OTHER_SITES
        if origin is None:
            allowed_here = not other_site
        else:
            own = f"{environ.get('wsgi.url_scheme', 'http')}://{environ.get('HTTP_HOST', '')}"
            candidate = _normal_origin(origin)
            allowed_here = candidate in extra or (
                candidate == _normal_origin(own) and not other_site
            )
        if not allowed_here:
            fields = {
                "origin": shown(origin or ""),
                "fetch_site": shown(environ.get("HTTP_SEC_FETCH_SITE", "")),
                "method": environ.get("REQUEST_METHOD"),
                "path": shown(environ.get("PATH_INFO", "")[:80]),
            }
            log.warning("request refused: foreign origin", extra={"fields": fields})
        return allowed_here

    return origin_allowed


class LoginThrottle:
    """Wrong tokens per client address: each one logged, and past the limit within the window
    that address is told to wait until its oldest failure ages out. Only wrong tokens are
    throttled: the right one is checked first and always gets in, so a guesser sharing the
    owner's address (loopback, a proxy) cannot lock the owner out."""

    def __init__(self, limit: int, window: float = FAILED_LOGIN_WINDOW_SECONDS) -> None:
        self.limit, self.window = limit, window
        self._lock = threading.Lock()
        self._failures: dict[str, deque[float]] = {}

    def wrong_token(self, address: str | None, where: str) -> int:
        """A wrong or missing token: 0 under the limit (counted and logged), else the whole
        seconds `address` must wait (for Retry-After; not counted again)."""
        with self._lock:
            recent = self._recent(address or "")
            if len(recent) >= self.limit:
                return int(max(0.0, recent[0] + self.window - time.monotonic())) + 1
            recent.append(time.monotonic())
            count = len(recent)
        log.warning(
            "access refused: missing or wrong token",
            extra={"fields": {"remote": address, "where": where, "recent_failures": count}},
        )
        return 0

    def _recent(self, address: str) -> deque[float]:
        recent = self._failures.setdefault(address, deque())
        horizon = time.monotonic() - self.window
        while recent and recent[0] < horizon:
            recent.popleft()
        if not recent and len(self._failures) > 10_000:  # many addresses: forget idle ones
            self._failures = {a: d for a, d in self._failures.items() if d}
            self._failures[address] = recent
        return recent
