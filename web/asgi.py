"""ASGI apps served beside the web server (A2A, MCP over HTTP): the access guard they share and
uvicorn on an asyncio loop in an OS thread of its own (utils.async_loop.LoopThread; a real
thread under eventlet too), bound to the web server's host, started and stopped with it.

Imported only when one of them is enabled: it loads starlette and uvicorn.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Generator, MutableMapping
from contextlib import contextmanager
from typing import Any

import uvicorn
from starlette.responses import JSONResponse

from utils.async_loop import LoopThread, Pending
from web.access import HostGuard, LoginThrottle, OriginCheck
from web.state import WebState

log = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Asgi = Callable[
    [Scope, Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]], Awaitable[None]
]
START_TIMEOUT_SECONDS = 10.0
STOP_TIMEOUT_SECONDS = 3.0


class AccessGuard:
    """ASGI middleware: the Host check of the web server, the Origin check when given one (a
    browser page of another site gets 403), then the token as `Authorization: Bearer` on
    everything `public` does not let through, with the web's throttle on wrong tokens; a POST
    without a Content-Length or with a body over `max_bytes` refused."""

    def __init__(
        self,
        app: Asgi,
        *,
        state: WebState,
        hosts: HostGuard,
        where: str,
        max_bytes: int,
        origin_allowed: OriginCheck | None = None,
        public: Callable[[Scope], bool] = lambda scope: False,
    ) -> None:
        self.app, self.state, self.hosts, self.where = app, state, hosts, where
        self.max_bytes, self.origin_allowed, self.public = max_bytes, origin_allowed, public
        # its own: its lock never crosses into the web's world
        self.throttle = LoginThrottle(state.settings.wrong_token_limit)

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        refusal = self._refusal(scope, headers)
        if refusal is None:
            await self.app(scope, receive, send)
        else:
            await refusal(scope, receive, send)

    def _refusal(self, scope: Scope, headers: dict[str, str]) -> JSONResponse | None:
        if not self.hosts.accepts(headers.get("host", "")):
            return error(
                403,
                "forbidden_host",
                "this server answers only to the host names it is configured for",
            )
        if self.origin_allowed is not None and not self.origin_allowed(
            headers.get("origin"), _environ(scope, headers)
        ):
            return error(
                403,
                "forbidden_origin",
                "requests from a browser page must come from an origin in AGENT_ALLOWED_ORIGINS",
            )
        if self.public(scope):
            return None
        scheme, _, token = headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not self.state.token_ok(token.strip()):
            wait = self.throttle.wrong_token((scope.get("client") or ("", 0))[0], self.where)
            if wait:
                return error(
                    429,
                    "too_many_attempts",
                    "too many wrong tokens; wait",
                    {"Retry-After": str(wait)},
                )
            return error(
                401,
                "unauthorized",
                "missing or wrong token: send "
                "`Authorization: Bearer TOKEN` (the web server's token)",
                {"WWW-Authenticate": "Bearer"},
            )
        length = headers.get("content-length")
        if scope["method"] == "POST" and (length is None or not length.isdigit()):
            return error(411, "length_required", "send the body with a Content-Length")
        if length is not None and length.isdigit() and int(length) > self.max_bytes:
            return error(413, "too_large", f"requests are limited to {self.max_bytes} bytes")
        return None


def _environ(scope: Scope, headers: dict[str, str]) -> dict[str, Any]:
    """What web.access's Origin check reads, from an ASGI request."""
    return {
        "wsgi.url_scheme": scope.get("scheme", "http"),
        "HTTP_HOST": headers.get("host", ""),
        "HTTP_SEC_FETCH_SITE": headers.get("sec-fetch-site", ""),
        "REQUEST_METHOD": scope.get("method", ""),
        "PATH_INFO": scope.get("path", ""),
    }


def error(
    status: int, code: str, message: str, headers: dict[str, str] | None = None
) -> JSONResponse:
    return JSONResponse(
        {"ok": False, "error": {"code": code, "message": message}},
        status_code=status,
        headers=headers,
    )


class _Uvicorn(uvicorn.Server):
    """uvicorn that leaves the process's signals to the web server."""

    @contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


class AsgiThread:
    """uvicorn serving `app` on its own loop thread; `start` waits until it listens."""

    def __init__(
        self, state: WebState, app: Asgi, *, name: str, host: str, port: int, lifespan: bool
    ) -> None:
        self.state, self.name, self.host, self.port = state, name, host, port
        config = uvicorn.Config(
            app,
            host=host,
            port=port,
            log_config=None,
            access_log=False,
            lifespan="on" if lifespan else "off",
            proxy_headers=False,
            timeout_graceful_shutdown=1,
        )
        self._server = _Uvicorn(config)
        self.loop: LoopThread | None = None
        self._serving: Pending[None] | None = None

    def start(self, port_setting: str) -> None:
        """Listen, or raise OSError (a port already taken) naming `port_setting`."""
        self.loop = LoopThread(self.name)
        self._serving = serving = self.loop.submit(self._server.serve())
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while not self._server.started and not serving.done and time.monotonic() < deadline:
            self.state.socketio.sleep(0.02)
        if not self._server.started:
            self.stop()
            raise OSError(
                f"the {self.name} could not listen on {self.host}:{self.port} (is the "
                f"port taken? set {port_setting})"
            )
        log.info(f"{self.name} started", extra={"fields": {"host": self.host, "port": self.port}})

    def stop(self) -> None:
        """Close the listener and open streams, then end the loop thread."""
        if self.loop is None:
            return
        self._server.should_exit = True
        deadline = time.monotonic() + STOP_TIMEOUT_SECONDS
        while self._serving and not self._serving.done and time.monotonic() < deadline:
            self.state.socketio.sleep(0.02)
        self.loop.stop(timeout=1.0)
        self.loop = None
        log.info(f"{self.name} stopped")
