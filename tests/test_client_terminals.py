"""workspace_client's terminal ops against the real server (`main.py web`, the local sandbox
under bubblewrap): a terminal opened, typed into, resized, read back and closed, sync and
asyncio."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from protocol.events import Done
from tests.fake_llm import FakeLLM, Reply
from tests.kit.server import ServerProcess
from tests.kit.settings import TOKEN
from tests.kit.waits import wait_until
from workspace_client import AsyncClient, Client, WorkspaceError

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.usefixtures("clean_fake"),
    pytest.mark.server(env={"AGENT_SANDBOX": "local"}),
]


@pytest.fixture
def client(server: ServerProcess) -> Iterator[Client]:
    with Client(server.url, TOKEN, timeout=30) as connected:
        if connected.status()["sandbox"]["kind"] != "bubblewrap":
            pytest.skip("bubblewrap is not usable here")
        yield connected


def conversation(client: Client, fake: FakeLLM) -> str:
    fake.script(Reply(content="hello"))
    events = list(client.run("hi"))
    assert isinstance(events[-1], Done)
    return events[-1].conversation_id or ""


def test_a_terminal_is_opened_typed_into_read_and_closed(client: Client, fake: FakeLLM) -> None:
    cid = conversation(client, fake)
    tid = client.open_terminal(cid, rows=20, cols=90)
    assert client.list_terminals(cid) == [tid]
    client.resize_terminal(cid, tid, 33, 111)
    assert client.terminal_input(cid, tid, "stty size; echo $((6*7))x\n") > 0
    wait_until(lambda: "42x" in client.terminal_scrollback(cid, tid), 30, "the echo")
    assert "33 111" in client.terminal_scrollback(cid, tid)
    client.close_terminal(cid, tid)
    assert client.list_terminals(cid) == []
    with pytest.raises(WorkspaceError) as refused:
        client.terminal_input(cid, tid, "x")
    assert refused.value.code == "not_found"


def test_the_asyncio_client_has_them_too(server: ServerProcess, client: Client, fake: FakeLLM):
    cid = conversation(client, fake)

    async def run() -> str:
        async with await AsyncClient.connect(server.url, TOKEN, timeout=30) as aio:
            tid = await aio.open_terminal(cid)
            await aio.resize_terminal(cid, tid, 25, 81)
            await aio.terminal_input(cid, tid, "echo $((7*6))y\n")
            for _ in range(600):
                text = await aio.terminal_scrollback(cid, tid)
                if "42y" in text:
                    break
                await asyncio.sleep(0.05)
            assert await aio.list_terminals(cid) == [tid]
            await aio.close_terminal(cid, tid)
            return text

    assert "42y" in asyncio.run(run())
