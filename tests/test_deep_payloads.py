"""Payloads nested too deeply, sent to the real server in both modes: a Socket.IO event's gets
`bad_request` through its ack, an Engine.IO packet's is let be, an A2A request's a JSON-RPC
parse error, an MCP one a 400; and the server keeps serving this connection and the others."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.kit.a2a import a2a_env
from tests.kit.raw_socket import RawSocketIO
from tests.kit.server import ServerProcess, free_port
from tests.kit.settings import TOKEN
from web.payload_depth import MAX_DEPTH

pytestmark = [pytest.mark.e2e, pytest.mark.server(modes=["threading", "eventlet"])]
LEVELS = 100_000
BEARER = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
def server_env(async_mode: str) -> dict[str, str]:
    """A2A and MCP over HTTP on, on ports of this mode's server's own."""
    return {**a2a_env(), "AGENT_MCP_HTTP": "true", "AGENT_MCP_HTTP_PORT": str(free_port())}


@pytest.fixture
def raw(server: ServerProcess) -> Iterator[RawSocketIO]:
    """A Socket.IO connection that can send any text."""
    connection = RawSocketIO(server.port, TOKEN)
    yield connection
    connection.close()


def nested(levels: int) -> str:
    """Lists within lists, `levels` deep, as JSON text."""
    return "[" * levels + "]" * levels


def test_an_event_nested_100000_levels_deep_gets_bad_request(
    server: ServerProcess, raw: RawSocketIO
) -> None:
    ack = raw.call_text(f'["get_status",{nested(LEVELS)}]', ack_id=7)
    assert ack["ok"] is False and ack["error"]["code"] == "bad_request", ack
    assert f"more than {MAX_DEPTH} levels" in ack["error"]["message"]
    assert raw.call("get_status", {}, ack_id=8)["ok"], "this connection no longer answered"
    other = RawSocketIO(server.port, TOKEN)
    try:
        assert other.call("get_status", {}, ack_id=1)["ok"], "another connection got no answer"
    finally:
        other.close()


def test_an_engine_io_packet_nested_100000_levels_deep_leaves_the_connection_served(
    raw: RawSocketIO,
) -> None:
    raw.send_text("3" + nested(LEVELS))  # a pong with data: Engine.IO decodes it, bounded too
    assert raw.call("get_status", {}, ack_id=9)["ok"], "this connection no longer answered"


def test_the_limit_counts_every_level_the_event_s_arguments_included(raw: RawSocketIO) -> None:
    def status(levels: int) -> dict[str, Any]:
        """get_status with an extra field (ignored) nested `levels` deep, under the arguments'
        list and the payload's object."""
        return dict(raw.call_text(f'["get_status",{{"extra":{nested(levels)}}}]', ack_id=levels))

    assert status(MAX_DEPTH - 2)["ok"], "a payload at the limit was refused"
    refused = status(MAX_DEPTH - 1)
    assert refused["ok"] is False and refused["error"]["code"] == "bad_request", refused


def test_an_a2a_request_nested_too_deeply_gets_a_parse_error(server: ServerProcess) -> None:
    a2a = f"http://127.0.0.1:{server.env['AGENT_A2A_PORT']}/"
    headers = {**BEARER, "A2A-Version": "1.0", "Content-Type": "application/json"}
    body = f'{{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{nested(LEVELS)}}}'
    answer = httpx.post(a2a, headers=headers, content=body, timeout=30)
    assert answer.status_code == 200, answer.text
    assert answer.json()["error"]["code"] == -32700, answer.text
    listed = httpx.post(
        a2a,
        headers=headers,
        json={"jsonrpc": "2.0", "id": 2, "method": "ListTasks", "params": {}},
        timeout=30,
    )
    assert "result" in listed.json(), listed.text


def test_an_mcp_request_nested_too_deeply_gets_a_parse_error(server: ServerProcess) -> None:
    mcp = f"http://127.0.0.1:{server.env['AGENT_MCP_HTTP_PORT']}/mcp"
    headers = {
        **BEARER,
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
    }
    body = f'{{"jsonrpc":"2.0","id":1,"method":"ping","params":{{"x":{nested(LEVELS)}}}}}'
    answer = httpx.post(mcp, headers=headers, content=body, timeout=30)
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["code"] == -32700, answer.text
