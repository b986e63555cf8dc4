"""MCP over streamable HTTP beside the real web server (AGENT_MCP_HTTP), driven by the official
MCP client in both protocol eras: tools, the workspace's files as resources (with change
notifications from the file watcher), the skills as prompts, and the access rules."""

from __future__ import annotations

import base64
import json
import threading
import warnings
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import anyio
import httpx
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from tests.kit.server import ServerProcess, free_port
from tests.kit.settings import TOKEN
from tests.kit.waits import wait_until

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(40))
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.server(
        modes=["threading", "eventlet"],
        files={
            "notes.txt": "first line\n",
            "src/app.py": "print('hi')\n",
            "pic.png": PNG,
            "big.txt": "x" * (600 * 1024),
            ".gitignore": "secret/\n",
            "secret/key.txt": "hidden\n",
        },
    ),
]
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


SKILL_MD = "---\nname: {name}\ndescription: {description}\n---\n\nDo it well.\n"


def write_skill(server: ServerProcess, name: str, description: str) -> None:
    folder = server.workspace / ".agents" / "skills" / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_text(SKILL_MD.format(name=name, description=description))


def test_a_skill_added_or_edited_in_the_workspace_changes_the_prompts_handshake_era(
    server: ServerProcess,
) -> None:
    changed: list[bool] = []

    async def on_message(message: Any) -> None:
        if isinstance(getattr(message, "root", message), types.PromptListChangedNotification):
            changed.append(True)

    async def until_changed(count: int) -> None:
        with anyio.fail_after(WAIT_SECONDS):
            while len(changed) < count:
                await anyio.sleep(0.05)

    async def session() -> None:
        async with connect(server, "legacy", message_handler=on_message) as client:
            caps = client.server_capabilities.prompts
            assert caps is not None and caps.list_changed
            names = {prompt.name for prompt in (await client.list_prompts()).prompts}
            assert "fresh-skill" not in names
            write_skill(server, "fresh-skill", "A skill written while a client listens.")
            await until_changed(1)
            prompts = {p.name: p for p in (await client.list_prompts()).prompts}
            assert prompts["fresh-skill"].description == "A skill written while a client listens."
            write_skill(server, "fresh-skill", "Edited.")
            await until_changed(2)
            prompts = {p.name: p for p in (await client.list_prompts()).prompts}
            assert prompts["fresh-skill"].description == "Edited."

    anyio.run(session)


def test_a_skill_removed_from_the_workspace_changes_the_prompts_on_listen(
    server: ServerProcess,
) -> None:
    write_skill(server, "doomed-skill", "Removed while a client listens.")

    async def session() -> None:
        async with connect(server) as client:
            with anyio.fail_after(WAIT_SECONDS):
                while "doomed-skill" not in {
                    p.name for p in (await client.list_prompts(cache_mode="bypass")).prompts
                }:
                    await anyio.sleep(0.1)
            async with client.listen(prompts_list_changed=True) as subscription:
                (server.workspace / ".agents" / "skills" / "doomed-skill" / "SKILL.md").unlink()
                (server.workspace / ".agents" / "skills" / "doomed-skill").rmdir()
                with anyio.fail_after(WAIT_SECONDS):
                    async for event in subscription:
                        assert type(event).__name__ == "PromptsListChanged"
                        break
            names = {p.name for p in (await client.list_prompts(cache_mode="bypass")).prompts}
            assert "doomed-skill" not in names

    anyio.run(session)


class RawSession:
    """An MCP session spoken with plain HTTP (2025-11-25), to see the SSE events themselves:
    their ids, the priming events, a stream dropped and resumed."""

    def __init__(self, server: ServerProcess) -> None:
        self.url = endpoint(server)
        self.http = httpx.Client(
            headers={"Authorization": f"Bearer {TOKEN}", "Accept": ACCEPT}, timeout=WAIT_SECONDS
        )
        opened = self.http.post(self.url, json=INITIALIZE)
        assert opened.status_code == 200, opened.text
        self.http.headers["mcp-session-id"] = opened.headers["mcp-session-id"]
        self.http.headers["mcp-protocol-version"] = "2025-11-25"
        self.id = opened.headers["mcp-session-id"]
        self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        self._next = 2

    def post(self, message: dict[str, Any]) -> httpx.Response:
        answer = self.http.post(self.url, json=message)
        assert answer.status_code in (200, 202), answer.text
        return answer

    def request(self, method: str, params: dict[str, Any]) -> None:
        self._next += 1
        self.post({"jsonrpc": "2.0", "id": self._next, "method": method, "params": params})

    @contextmanager
    def stream(self, last_event_id: str | None = None) -> Iterator[Iterator[dict[str, str]]]:
        """The standalone GET stream's events ({id, data, retry} as sent), resumed after
        `last_event_id` when given."""
        headers = {"Accept": "text/event-stream"}
        if last_event_id is not None:
            headers["Last-Event-ID"] = last_event_id
        with self.http.stream("GET", self.url, headers=headers) as answer:
            assert answer.status_code == 200
            yield sse_events(answer.iter_lines())

    def close(self) -> None:
        self.http.delete(self.url)
        self.http.close()


def sse_events(lines: Iterator[str]) -> Iterator[dict[str, str]]:
    event: dict[str, str] = {}
    for line in lines:
        if not line:
            if event:
                yield event
            event = {}
        elif not line.startswith(":"):
            field, _, value = line.partition(":")
            event[field] = value.removeprefix(" ")


def updated_uri(event: dict[str, str]) -> str | None:
    data = json.loads(event["data"]) if event.get("data") else {}
    if data.get("method") == "notifications/resources/updated":
        return str(data["params"]["uri"])
    return None


def settled_watcher(server: ServerProcess) -> None:
    """Returns once the file watcher reported a write made after everything before this call
    (its batches come in order): a test that wrote files may then tell their late reports
    from its own. The probe is written again until it is seen (the watcher may not watch yet
    when a server has just started)."""
    probe = server.workspace / "watcher-probe.txt"
    probe.write_text("0\n")
    session, seen = RawSession(server), threading.Event()

    def write_until_seen() -> None:
        count = 0
        while not seen.wait(0.3):
            count += 1
            probe.write_text(f"{count}\n")

    try:
        session.request("resources/subscribe", {"uri": "workspace:///watcher-probe.txt"})
        with session.stream() as events:
            writer = threading.Thread(target=write_until_seen, daemon=True)
            writer.start()
            try:
                next(e for e in events if updated_uri(e) == "workspace:///watcher-probe.txt")
            finally:
                seen.set()
                writer.join()
    finally:
        session.close()


def test_a_client_that_lost_its_stream_resumes_it_with_last_event_id(
    server: ServerProcess,
) -> None:
    """Events are stored: the notification sent while the stream was down is replayed on the
    reconnect (before the reconnect's priming event, which the live ones would follow)."""
    for name in ("first.txt", "missed.txt"):
        (server.workspace / name).write_text("0\n")
    settled_watcher(server)
    lost, witness = RawSession(server), RawSession(server)
    try:
        for session in (lost, witness):
            for name in ("first.txt", "missed.txt"):
                session.request("resources/subscribe", {"uri": f"workspace:///{name}"})
        with lost.stream() as events:
            (server.workspace / "first.txt").write_text("1\n")
            first = next(e for e in events if updated_uri(e) == "workspace:///first.txt")
        with witness.stream() as events:
            (server.workspace / "missed.txt").write_text("1\n")
            next(e for e in events if updated_uri(e) == "workspace:///missed.txt")
        with lost.stream(last_event_id=first["id"]) as events:
            # What was stored after `first`, then the priming event (other notifications, such
            # as a late list_changed for the files made above, may be stored too).
            replayed: list[dict[str, str]] = []
            priming: dict[str, str] = {}
            for event in events:
                if event.get("data") == "":
                    priming = event
                    break
                replayed.append(event)
            uris = [updated_uri(event) for event in replayed]
            assert "workspace:///missed.txt" in uris, replayed
            # Nothing seen before the loss comes again (a later update of first.txt may: the
            # watcher can see one write as two modifications).
            assert all(int(event["id"]) > int(first["id"]) for event in replayed), replayed
            assert priming.get("retry") == "2000", priming
    finally:
        lost.close()
        witness.close()


def test_another_sessions_event_id_replays_nothing(server: ServerProcess) -> None:
    (server.workspace / "private.txt").write_text("0\n")
    settled_watcher(server)
    owner, other = RawSession(server), RawSession(server)
    try:
        owner.request("resources/subscribe", {"uri": "workspace:///private.txt"})
        with owner.stream() as events:
            (server.workspace / "private.txt").write_text("1\n")
            seen = next(e for e in events if updated_uri(e))
        (server.workspace / "private.txt").write_text("2\n")
        answer = other.http.get(
            other.url, headers={"Accept": "text/event-stream", "Last-Event-ID": seen["id"]}
        )
        assert answer.status_code == 200 and "private.txt" not in answer.text
    finally:
        owner.close()
        other.close()


def test_a_deleted_sessions_subscriptions_are_dropped(server: ServerProcess) -> None:
    """The subscriptions of a session its client ended (DELETE) are forgotten at once, not at
    the first notification that fails to reach it."""
    (server.workspace / "watched.txt").write_text("0\n")
    settled_watcher(server)
    log = server.data_dir / "logs" / "agent.jsonl"
    start = len(log.read_text())
    ended, witness = RawSession(server), RawSession(server)
    try:
        for session in (ended, witness):
            session.request("resources/subscribe", {"uri": "workspace:///watched.txt"})
        ended.close()
        wait_until(
            lambda: any(
                "mcp session ended" in line
                and ended.id[:8] in line
                and '"subscriptions": 1' in line
                for line in log.read_text()[start:].splitlines()
            ),
            timeout=WAIT_SECONDS,
        )
        with witness.stream() as events:
            (server.workspace / "watched.txt").write_text("1\n")
            next(e for e in events if updated_uri(e) == "workspace:///watched.txt")
        assert "mcp connection gone" not in log.read_text()[start:]
    finally:
        witness.close()
