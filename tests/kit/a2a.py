"""The A2A part of the test kit: a server's environment with A2A on and `call_agent` knowing
that same endpoint, and a conversation's records as the page reads them."""

from __future__ import annotations

import json
from typing import Any

from tests.kit.clients import EventClient
from tests.kit.server import free_port
from tests.kit.settings import TOKEN


def a2a_env() -> dict[str, str]:
    """A2A on (on a free port), and `call_agent` knowing that endpoint as `peer` (and as
    `stranger`, with a wrong token)."""
    port = free_port()
    remotes = [
        {"name": "peer", "url": f"http://127.0.0.1:{port}", "token": TOKEN},
        {"name": "stranger", "url": f"http://127.0.0.1:{port}", "token": "wrong-token"},
    ]
    return {
        "AGENT_A2A": "true",
        "AGENT_A2A_PORT": str(port),
        "AGENT_REMOTE_AGENTS": json.dumps(remotes),
    }


def history(client: EventClient, conversation_id: str) -> list[dict[str, Any]]:
    ack = client.call("get_conversation", {"conversation_id": conversation_id})
    assert ack["ok"], ack
    return list(ack["messages"])
