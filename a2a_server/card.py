"""The public Agent Card, in the two shapes its clients read.

`/.well-known/agent-card.json` is the card as protocol 1.0 defines it: the ProtoJSON of the
AgentCard message and nothing else (a strict 1.0 parse refuses any other field), listing the
JSON-RPC interface as 1.0 and as 0.3. A 0.3 client reads the endpoint from top-level fields
(`url`, `preferredTransport`) that 1.0 no longer has, and the SDK's own card route adds them
(and 0.3 fields inside each security scheme) whenever a 0.3 interface is listed: that card is
served at the card's older name, `/.well-known/agent.json`.
"""

from __future__ import annotations

import hashlib
import json

from a2a.server.routes import create_agent_card_routes
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
from google.protobuf.json_format import MessageToDict
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from core.agent_specs import AgentCatalog

VERSION = "0.1.0"
LEGACY_CARD_PATH = "/.well-known/agent.json"
CARD_PATHS = (AGENT_CARD_WELL_KNOWN_PATH, LEGACY_CARD_PATH)


def agent_card(
    agents: AgentCatalog, default_agent: str, url: str, *, trust_workspace: bool = False
) -> AgentCard:
    """The public card: our agents as skills, the JSON-RPC interface as 1.0 and as 0.3, bearer
    auth. It names no path, model, provider or token, and, unless the user trusts the
    workspace's agents, none of theirs: anyone reaching the port reads it, and a task wrote
    them (they still run when a message names one)."""
    listed = agents.summaries() if trust_workspace else agents.trusted_summaries()
    skills = [
        AgentSkill(
            id=spec["name"], name=spec["name"], description=spec["description"], tags=[spec["mode"]]
        )
        for spec in listed
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


def card_routes(card: AgentCard) -> list[Route]:
    """GET (and HEAD) of the 1.0 card and of the 0.3 one, each with an ETag."""
    return [
        _strict_card_route(card),
        *create_agent_card_routes(card, card_url=LEGACY_CARD_PATH),
    ]


def _strict_card_route(card: AgentCard) -> Route:
    body = MessageToDict(card)
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"))
    etag = f'W/"{hashlib.sha256(canonical.encode()).hexdigest()}"'

    async def endpoint(request: Request) -> Response:
        headers = {"ETag": etag}
        if _selects(request.headers.get("if-none-match", ""), etag):
            return Response(status_code=304, headers=headers)
        return JSONResponse(body, headers=headers)

    return Route(AGENT_CARD_WELL_KNOWN_PATH, endpoint, methods=["GET"])


def _selects(if_none_match: str, etag: str) -> bool:
    """Whether an If-None-Match header names this card (weak comparison, RFC 9110 13.1.2)."""
    tags = [tag.strip().removeprefix("W/") for tag in if_none_match.split(",")]
    return "*" in tags or etag.removeprefix("W/") in tags
