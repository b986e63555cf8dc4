"""workspace_client's process ops against the real server (`main.py web`, the local sandbox
under bubblewrap) on the fake model: a server the model started in the background is listed
with its port, its output read from an offset, opened as an app, stopped and restarted, sync
and asyncio."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
import requests

from protocol.events import Done, ToolEvent
from tests.fake_llm import Call, FakeLLM, Reply
from tests.kit.server import ServerProcess
from tests.kit.settings import TOKEN
from tests.kit.waits import wait_until
from workspace_client import AsyncClient, BackgroundProcess, Client, ProcessOutput, WorkspaceError

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.usefixtures("clean_fake"),
    pytest.mark.server(env={"AGENT_SANDBOX": "local"}),
]

SERVER = "python3 -u -m http.server 8000 --bind 127.0.0.1"
SERVING = "Serving HTTP on 127.0.0.1 port 8000"


@pytest.fixture
def client(server: ServerProcess) -> Iterator[Client]:
    with Client(server.url, TOKEN, timeout=30) as connected:
        if connected.status()["sandbox"]["kind"] != "bubblewrap":
            pytest.skip("bubblewrap is not usable here")
        yield connected


def start_in_background(client: Client, fake: FakeLLM) -> str:
    """A task whose model starts SERVER in the background; its conversation."""
    fake.script(
        Reply(tool_calls=[Call("run_command", {"command": SERVER, "background": True})]),
        Reply(content="started"),
    )
    events = list(client.run("start the server"))
    result = next(e for e in events if isinstance(e, ToolEvent) and e.phase == "result")
    assert result.ok and "running in the background as p1" in (result.output or ""), result
    assert isinstance(events[-1], Done)
    return events[-1].conversation_id or ""


def listening(client: Client, cid: str) -> BackgroundProcess | None:
    listed = client.list_processes(cid)
    return listed[0] if listed and listed[0].ports else None


def served(client: Client, cid: str) -> ProcessOutput | None:
    out = client.process_output(cid, "p1")
    return out if SERVING in out.text else None


def test_processes_are_listed_read_stopped_and_restarted(client: Client, fake: FakeLLM):
    cid = start_in_background(client, fake)
    process = wait_until(lambda: listening(client, cid), 30, "the server's port")
    assert (process.id, process.command, process.origin) == ("p1", SERVER, "agent")
    assert process.running and process.ports == [8000] and isinstance(process.pid, int)

    out = wait_until(lambda: served(client, cid), 30, "the server's first line")
    assert out.offset == 0 and out.running and out.exit_code is None
    assert out.next_offset == len(out.text.encode()) <= out.output_end
    later = client.process_output(cid, "p1", offset=len("Serving "))
    assert later.offset == len("Serving ") and later.text.startswith("HTTP on 127.0.0.1")
    assert client.process_output(cid, "p1").text == out.text  # reading moves nothing

    url = client.open_app(cid, "p1")
    assert client.open_app(cid, port=8000) == url  # the same app, however it is named
    listing = requests.get(url, timeout=30)  # through the proxy: the token, then its cookie
    assert listing.ok and "Directory listing" in listing.text, listing.text[:200]

    stopped = client.stop_process(cid, "p1")
    assert stopped.id == "p1" and not stopped.running and stopped.end_reason == "stopped"
    again = client.restart_process(cid, "p1")
    assert again.id == "p2" and again.command == SERVER and again.running
    ids = {p.id: p.running for p in client.list_processes(cid)}
    assert ids == {"p1": False, "p2": True}, ids

    with pytest.raises(WorkspaceError) as missing:
        client.process_output(cid, "p9")
    assert missing.value.code == "not_found"

    async def the_asyncio_form() -> tuple[list[BackgroundProcess], BackgroundProcess]:
        async with await AsyncClient.connect(client.url, TOKEN, timeout=30) as aio:
            await aio.process_output(cid, "p2")
            return await aio.list_processes(cid), await aio.stop_process(cid, "p2")

    listed, ended = asyncio.run(the_asyncio_form())
    assert [p.id for p in listed] == ["p1", "p2"]
    assert ended.id == "p2" and not ended.running
