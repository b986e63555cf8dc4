"""The A2A server (protocol 1.0, 0.3 method names accepted) beside the web server.

The a2a SDK is ASGI only, so it runs under uvicorn on its own port, on an asyncio loop in an
OS thread of its own (utils.async_loop.LoopThread; a real thread under eventlet too). It is
started by `web_server.serve` when `AGENT_A2A` is on, binds to the web server's host, and is
stopped with it. The Agent Cards are public; every other request needs the web token as a
bearer token. Imported only when A2A is enabled: it loads the SDK, starlette and uvicorn.
"""

from __future__ import annotations

from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.tasks import InMemoryTaskStore
from starlette.applications import Starlette

from a2a_server.card import CARD_PATHS, agent_card, card_routes
from a2a_server.executor import ConversationExecutor, WebWorld
from a2a_server.rpc import jsonrpc_routes
from web.access import HostGuard
from web.asgi import AccessGuard, Asgi, AsgiThread, Scope
from web.state import WebState

MAX_REQUEST_BYTES = 1024 * 1024


def build_app(state: WebState, *, host: str, url: str) -> Asgi:
    """The Starlette app: the cards, the JSON-RPC endpoint at `/`, behind the AccessGuard."""
    settings = state.settings
    card = agent_card(
        state.services.agents,
        settings.default_agent,
        url,
        trust_workspace=settings.trust_workspace_agents,
    )
    executor = ConversationExecutor(state, WebWorld(state))
    handler = DefaultRequestHandler(
        agent_executor=executor, task_store=InMemoryTaskStore(), agent_card=card
    )
    routes = [*card_routes(card), *jsonrpc_routes(handler, rpc_url="/")]
    hosts = HostGuard(lambda environ, start: [], bind_host=host, allowed=settings.allowed_hosts)
    return AccessGuard(
        Starlette(routes=routes),
        state=state,
        hosts=hosts,
        where="a2a",
        max_bytes=MAX_REQUEST_BYTES,
        public=_card_request,
    )


def _card_request(scope: Scope) -> bool:
    return scope["path"] in CARD_PATHS and scope["method"] in ("GET", "HEAD")


class A2AServer:
    """The A2A app under uvicorn on its own loop thread; `start` waits until it listens."""

    def __init__(self, state: WebState, *, host: str, port: int) -> None:
        shown = "127.0.0.1" if host in ("0.0.0.0", "::") else host
        self.url = f"http://{shown}:{port}/"
        app = build_app(state, host=host, url=self.url)
        self._thread = AsgiThread(
            state, app, name="A2A server", host=host, port=port, lifespan=False
        )

    def start(self) -> None:
        """Listen, or raise OSError (a port already taken)."""
        self._thread.start("AGENT_A2A_PORT")

    def stop(self) -> None:
        self._thread.stop()
