"""MCP over streamable HTTP beside the real web server (AGENT_MCP_HTTP), driven by the official
MCP client in both protocol eras: tools, the workspace's files as resources (with change
notifications from the file watcher), the skills as prompts, and the access rules."""

from __future__ import annotations

import base64
import json
import warnings
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from tests.web_helpers import TOKEN, ServerProcess, free_port

pytestmark = [pytest.mark.e2e]

ASYNC_MODES = ["threading", "eventlet"]
PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(40))
WORKSPACE_FILES: dict[str, str | bytes] = {
    "notes.txt": "first line\n",
    "src/app.py": "print('hi')\n",
    "pic.png": PNG,
    "big.txt": "x" * (600 * 1024),
    ".gitignore": "secret/\n",
    "secret/key.txt": "hidden\n",
}
WAIT_SECONDS = 15


@pytest.fixture(scope="module")
def server_env(async_mode: str) -> dict[str, str]:
    return {
        "AGENT_MCP_HTTP": "true",
        "AGENT_MCP_HTTP_PORT": str(free_port()),
        "AGENT_APPROVAL": "ask",  # the reading tools and those named here
        "AGENT_MCP_SERVER_TOOLS": json.dumps(["create_file"]),
    }


def endpoint(server: ServerProcess) -> str:
    return f"http://127.0.0.1:{server.env['AGENT_MCP_HTTP_PORT']}/mcp"


@asynccontextmanager
async def connect(
    server: ServerProcess, mode: str = "auto", token: str = TOKEN, **options: Any
) -> AsyncIterator[Client]:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    async with (
        http,
        Client(
            streamable_http_client(endpoint(server), http_client=http), mode=mode, **options
        ) as client,
    ):
        yield client


def text_of(result: types.CallToolResult) -> str:
    return "".join(block.text for block in result.content if isinstance(block, types.TextContent))


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_tools_follow_the_offering_rules_and_run_in_the_workspace(
    server: ServerProcess, mode: str
) -> None:
    async def session() -> None:
        async with connect(server, mode) as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
            assert {"read_file", "list_files", "create_file"} <= names
            assert "run_command" not in names and "focus_file" not in names
            made = await client.call_tool(
                "create_file", {"path": f"made-{mode}.txt", "content": "ok\n"}
            )
            assert not made.is_error, text_of(made)
            read = await client.call_tool("read_file", {"path": "notes.txt"})
            assert "first line" in text_of(read)

    anyio.run(session)
    assert (server.workspace / f"made-{mode}.txt").read_text() == "ok\n"


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_an_unknown_or_unoffered_tool_is_a_protocol_error(server: ServerProcess, mode: str) -> None:
    """MCP's tools/call: an unknown tool is a JSON-RPC error (-32602), not a failed call
    (the conformance suite took our failed call for a passing tool); arguments that do not fit
    stay a failed call the model can read."""

    async def session() -> None:
        async with connect(server, mode) as client:
            for name in ("test_simple_text", "run_command"):
                with pytest.raises(MCPError, match=f"Unknown tool '{name}'") as refused:
                    await client.call_tool(name, {})
                assert refused.value.code == types.INVALID_PARAMS
            invalid = await client.call_tool("read_file", {"start_line": 1})
            assert invalid.is_error and "path" in text_of(invalid)

    anyio.run(session)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_resources_list_and_read_text_and_blobs_within_the_workspace(
    server: ServerProcess, mode: str
) -> None:
    async def session() -> None:
        async with connect(server, mode) as client:
            listed = await client.list_resources()
            uris = {resource.uri: resource for resource in listed.resources}
            assert {"workspace:///notes.txt", "workspace:///src/app.py"} <= set(uris)
            assert "workspace:///secret/key.txt" not in uris  # .gitignore'd, as the tree hides it
            assert uris["workspace:///pic.png"].mime_type == "image/png"

            text = (await client.read_resource("workspace:///src/app.py")).contents[0]
            assert isinstance(text, types.TextResourceContents) and text.text == "print('hi')\n"
            blob = (await client.read_resource("workspace:///pic.png")).contents[0]
            assert isinstance(blob, types.BlobResourceContents)
            assert blob.mime_type == "image/png" and base64.b64decode(blob.blob) == PNG

            for uri, says in [
                ("workspace:///big.txt", "bytes"),
                ("workspace:///../outside.txt", "not a file path"),
                ("workspace:///secret/key.txt", "hides"),
                ("file:///etc/passwd", "not a workspace resource"),
                ("workspace:///nothing.txt", "no such file"),
            ]:
                with pytest.raises(MCPError, match=says):
                    await client.read_resource(uri, cache_mode="bypass")

    anyio.run(session)


def test_resources_are_listed_in_pages(server: ServerProcess) -> None:
    many = server.workspace / "many"
    many.mkdir(exist_ok=True)
    for index in range(230):
        (many / f"f{index:03}.txt").write_text("x")

    async def session() -> set[str]:
        seen: list[str] = []
        async with connect(server) as client:
            cursor = None
            pages = 0
            while True:
                page = await client.list_resources(cursor=cursor, cache_mode="bypass")
                seen += [resource.uri for resource in page.resources]
                pages += 1
                cursor = page.next_cursor
                if cursor is None:
                    break
            assert pages >= 2
        assert len(seen) == len(set(seen))
        return set(seen)

    uris = anyio.run(session)
    assert {f"workspace:///many/f{index:03}.txt" for index in range(230)} <= uris


def test_a_subscribed_file_written_in_the_workspace_is_notified_handshake_era(
    server: ServerProcess,
) -> None:
    updated: list[str] = []
    listing: list[bool] = []
    arrived = anyio.Event()

    async def on_message(message: Any) -> None:
        root = getattr(message, "root", message)
        if isinstance(root, types.ResourceUpdatedNotification):
            updated.append(str(root.params.uri))
            arrived.set()
        elif isinstance(root, types.ResourceListChangedNotification):
            listing.append(True)

    async def session() -> None:
        async with connect(server, "legacy", message_handler=on_message) as client:
            caps = client.server_capabilities.resources
            assert caps is not None and caps.subscribe and caps.list_changed
            await client.list_resources()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                await client.subscribe_resource("workspace:///notes.txt")
            await anyio.sleep(0.3)  # the subscription's standalone stream is open by now
            (server.workspace / "notes.txt").write_text("second line\n")
            (server.workspace / "new-file.txt").write_text("new\n")
            with anyio.fail_after(WAIT_SECONDS):
                await arrived.wait()
            with anyio.fail_after(WAIT_SECONDS):
                while not listing:
                    await anyio.sleep(0.05)

    anyio.run(session)
    assert updated[0] == "workspace:///notes.txt"


def test_a_subscribed_file_written_in_the_workspace_is_notified_on_listen(
    server: ServerProcess,
) -> None:
    async def session() -> list[Any]:
        events: list[Any] = []
        async with connect(server) as client:
            async with client.listen(
                resources_list_changed=True, resource_subscriptions=["workspace:///src/app.py"]
            ) as subscription:
                (server.workspace / "src" / "app.py").write_text("print('changed')\n")
                with anyio.fail_after(WAIT_SECONDS):
                    async for event in subscription:
                        events.append(event)
                        if getattr(event, "uri", None) == "workspace:///src/app.py":
                            break
            changed = await client.read_resource("workspace:///src/app.py", cache_mode="bypass")
            content = changed.contents[0]
            assert isinstance(content, types.TextResourceContents)
            assert content.text == "print('changed')\n"
        return events

    events = anyio.run(session)
    assert any(getattr(event, "uri", None) == "workspace:///src/app.py" for event in events)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_skills_are_prompts(server: ServerProcess, mode: str) -> None:
    async def session() -> None:
        async with connect(server, mode) as client:
            prompts = {prompt.name: prompt for prompt in (await client.list_prompts()).prompts}
            assert "code-review" in prompts
            review = prompts["code-review"]
            assert review.description and review.arguments
            assert [a.name for a in review.arguments] == ["request"]
            got = await client.get_prompt("code-review", {"request": "look at src/app.py"})
            message = got.messages[0]
            assert message.role == "user" and isinstance(message.content, types.TextContent)
            assert message.content.text.startswith("# Skill: code-review")
            assert message.content.text.endswith("look at src/app.py")
            with pytest.raises(MCPError, match="no skill"):
                await client.get_prompt("no-such-skill")

    anyio.run(session)


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"},
    },
}
ACCEPT = "application/json, text/event-stream"


@pytest.mark.parametrize(
    ("headers", "status", "code"),
    [
        ({}, 401, "unauthorized"),
        ({"Authorization": "Bearer wrong-token"}, 401, "unauthorized"),
        ({"Authorization": f"Bearer {TOKEN}", "Host": "evil.example"}, 403, "forbidden_host"),
        (
            {"Authorization": f"Bearer {TOKEN}", "Origin": "http://evil.example"},
            403,
            "forbidden_origin",
        ),
    ],
)
def test_requests_without_the_token_or_from_elsewhere_are_refused(
    server: ServerProcess, headers: dict[str, str], status: int, code: str
) -> None:
    answer = httpx.post(
        endpoint(server), json=INITIALIZE, headers={"Accept": ACCEPT, **headers}, timeout=10
    )
    assert answer.status_code == status, answer.text
    assert answer.json()["error"]["code"] == code


def test_the_official_client_with_a_wrong_token_fails(server: ServerProcess) -> None:
    async def session() -> None:
        async with connect(server, token="wrong-token") as client:
            await client.list_tools()

    with pytest.raises(ExceptionGroup) as caught:
        anyio.run(session)
    assert caught.group_contains(MCPError, match="error response", depth=2)


def test_the_right_token_with_a_raw_request_is_answered(server: ServerProcess) -> None:
    answer = httpx.post(
        endpoint(server),
        json=INITIALIZE,
        headers={"Accept": ACCEPT, "Authorization": f"Bearer {TOKEN}"},
        timeout=10,
    )
    assert answer.status_code == 200, answer.text
    assert "mcp-session-id" in answer.headers
