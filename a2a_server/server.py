"""The A2A server (protocol 1.0, 0.3 method names accepted) beside the web server.

The a2a SDK is ASGI only, so it runs under uvicorn on its own port, on an asyncio loop in an
OS thread of its own (utils.async_loop.LoopThread; a real thread under eventlet too). It is
started by `web_server.serve` when `AGENT_A2A` is on, binds to the web server's host, and is
stopped with it. The Agent Card is public; every other request needs the web token as a
bearer token. Imported only when A2A is enabled: it loads the SDK, starlette and uvicorn.
"""

from __future__ import annotations

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

from a2a_server.executor import ConversationExecutor, WebWorld
from a2a_server.rpc import jsonrpc_routes
from core.agent_specs import AgentCatalog
from web.access import HostGuard
from web.asgi import AccessGuard, Asgi, AsgiThread, Scope
from web.state import WebState

MAX_REQUEST_BYTES = 1024 * 1024
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
    return AccessGuard(
        Starlette(routes=routes),
        state=state,
        hosts=hosts,
        where="a2a",
        max_bytes=MAX_REQUEST_BYTES,
        public=_card_request,
    )


def _card_request(scope: Scope) -> bool:
    return scope["path"] == AGENT_CARD_WELL_KNOWN_PATH and scope["method"] in ("GET", "HEAD")


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
