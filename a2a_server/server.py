"""The A2A server (protocol 1.0, 0.3 method names accepted) beside the web server.

The a2a SDK is ASGI only, so it runs under uvicorn on its own port, on an asyncio loop in an
OS thread of its own (utils.async_loop.LoopThread; a real thread under eventlet too). It is
started by `web_server.serve` when `AGENT_A2A` is on, binds to the web server's host, and is
stopped with it. The Agent Card is public; every other request needs the web token as a
bearer token. Imported only when A2A is enabled: it loads the SDK, starlette and uvicorn.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Generator, MutableMapping
from contextlib import contextmanager
from typing import Any

import uvicorn
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    HTTPAuthSecurityScheme,
    SecurityRequirement,
    SecurityScheme,
    StringList,
)
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH
from starlette.applications import Starlette
from starlette.responses import JSONResponse

from a2a_server.executor import ConversationExecutor, WebWorld
from a2a_server.rpc import jsonrpc_routes
from core.agent_specs import AgentCatalog
from utils.async_loop import LoopThread, Pending
from web.access import HostGuard, LoginThrottle
from web.state import WebState

log = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Asgi = Callable[
    [Scope, Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]], Awaitable[None]
]
MAX_REQUEST_BYTES = 1024 * 1024
START_TIMEOUT_SECONDS = 10.0
STOP_TIMEOUT_SECONDS = 3.0
VERSION = "0.1.0"


def agent_card(agents: AgentCatalog, default_agent: str, url: str) -> AgentCard:
    """The public card: our agents as skills, the JSON-RPC interface as 1.0 and as 0.3 (the
    SDK adds the 0.3 fields `url`, `preferredTransport`... only then), bearer auth. It names
    no path, model, provider or token."""
    skills = [
        AgentSkill(
            id=spec["name"], name=spec["name"], description=spec["description"], tags=[spec["mode"]]
        )
        for spec in agents.summaries()
    ]
    description = (
        "An LLM agent working in one workspace folder: it reads, writes and runs things there "
        "and answers with what it did. Each skill is one of its agents; name one with "
        f'metadata {{"agent": NAME}} on the message (default: {default_agent}). Messages in '
        "the same context continue the same conversation."
    )
    bearer = HTTPAuthSecurityScheme(
        scheme="bearer", description="the web server's access token (AGENT_WEB_TOKEN)"
    )
    return AgentCard(
        name="Workspace Agent",
        description=description,
        version=VERSION,
        supported_interfaces=[
            AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version=version)
            for version in ("1.0", "0.3")
        ],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=skills,
        security_schemes={"bearer": SecurityScheme(http_auth_security_scheme=bearer)},
        security_requirements=[SecurityRequirement(schemes={"bearer": StringList()})],
    )


class AccessGuard:
    """ASGI middleware: the Host check of the web server, then the token on everything but
    the card, with the same throttle on wrong tokens; bodies over 1 MiB refused."""

    def __init__(self, app: Asgi, *, state: WebState, hosts: HostGuard) -> None:
        self.app = app
        self.state = state
        self.hosts = hosts
        self.throttle = LoginThrottle()  # its own: its lock never crosses into the web's world

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
            return _error(
                403,
                "forbidden_host",
                "this server answers only to the host names it is configured for",
            )
        if scope["path"] == AGENT_CARD_WELL_KNOWN_PATH and scope["method"] in ("GET", "HEAD"):
            return None
        scheme, _, token = headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not self.state.token_ok(token.strip()):
            wait = self.throttle.wrong_token((scope.get("client") or ("", 0))[0], "a2a")
            if wait:
                return _error(
                    429,
                    "too_many_attempts",
                    "too many wrong tokens; wait",
                    {"Retry-After": str(wait)},
                )
            return _error(
                401,
                "unauthorized",
                "missing or wrong token: send "
                "`Authorization: Bearer TOKEN` (the web server's token)",
                {"WWW-Authenticate": "Bearer"},
            )
        length = headers.get("content-length")
        if scope["method"] == "POST" and (length is None or not length.isdigit()):
            return _error(411, "length_required", "send the body with a Content-Length")
        if length is not None and length.isdigit() and int(length) > MAX_REQUEST_BYTES:
            return _error(413, "too_large", f"requests are limited to {MAX_REQUEST_BYTES} bytes")
        return None


def _error(
    status: int, code: str, message: str, headers: dict[str, str] | None = None
) -> JSONResponse:
    return JSONResponse(
        {"ok": False, "error": {"code": code, "message": message}},
        status_code=status,
        headers=headers,
    )


def build_app(state: WebState, *, host: str, url: str) -> Asgi:
    """The Starlette app: the card, the JSON-RPC endpoint at `/`, behind the AccessGuard."""
    settings = state.settings
    card = agent_card(state.services.agents, settings.default_agent, url)
    executor = ConversationExecutor(state, WebWorld(state))
    handler = DefaultRequestHandler(
        agent_executor=executor, task_store=InMemoryTaskStore(), agent_card=card
    )
    routes = [
        *create_agent_card_routes(card),
        *jsonrpc_routes(handler, rpc_url="/"),
    ]
    hosts = HostGuard(lambda environ, start: [], bind_host=host, allowed=settings.allowed_hosts)
    return AccessGuard(Starlette(routes=routes), state=state, hosts=hosts)


class _Uvicorn(uvicorn.Server):
    """uvicorn that leaves the process's signals to the web server."""

    @contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


class A2AServer:
    """uvicorn serving the A2A app on its own loop thread; `start` waits until it listens."""

    def __init__(self, state: WebState, *, host: str, port: int) -> None:
        self.state, self.host, self.port = state, host, port
        shown = "127.0.0.1" if host in ("0.0.0.0", "::") else host
        self.url = f"http://{shown}:{port}/"
        config = uvicorn.Config(
            build_app(state, host=host, url=self.url),
            host=host,
            port=port,
            log_config=None,
            access_log=False,
            lifespan="off",
            proxy_headers=False,
            timeout_graceful_shutdown=1,
        )
        self._server = _Uvicorn(config)
        self._loop: LoopThread | None = None
        self._serving: Pending[None] | None = None

    def start(self) -> None:
        """Listen, or raise OSError (a port already taken)."""
        self._loop = LoopThread("a2a-server")
        self._serving = serving = self._loop.submit(self._server.serve())
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while not self._server.started and not serving.done and time.monotonic() < deadline:
            self.state.socketio.sleep(0.02)
        if not self._server.started:
            self.stop()
            raise OSError(
                f"the A2A server could not listen on {self.host}:{self.port} (is the "
                "port taken? set AGENT_A2A_PORT)"
            )
        log.info("a2a server started", extra={"fields": {"host": self.host, "port": self.port}})

    def stop(self) -> None:
        """Close the listener and open streams, then end the loop thread."""
        if self._loop is None:
            return
        self._server.should_exit = True
        deadline = time.monotonic() + STOP_TIMEOUT_SECONDS
        while self._serving and not self._serving.done and time.monotonic() < deadline:
            self.state.socketio.sleep(0.02)
        self._loop.stop(timeout=1.0)
        self._loop = None
        log.info("a2a server stopped")
