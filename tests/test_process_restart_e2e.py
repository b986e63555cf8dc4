"""Background processes across a server restart, through the real server (`main.py web`, the
local sandbox under bubblewrap) and the fake model: what was running when the server went
away (killed, or stopped) ends as `server_stopped`, an `exited` event says so to every page
that joins, and the model is told once, with the next message of the conversation."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fake_llm import FakeLLM
from tests.kit.clients import EventClient, connected
from tests.kit.model import calls_in_the_message, run_calls
from tests.kit.server import ServerProcess, serving

pytestmark = [pytest.mark.e2e]

TASK_SECONDS = 90
ENV = {"AGENT_SANDBOX": "local", "AGENT_PROCESS_SETTLE_SECONDS": "0.5"}
NOTE = "ended when the server stopped"


@pytest.fixture
def server(tmp_path: Path, fake_llm: FakeLLM) -> Iterator[ServerProcess]:
    fake_llm.responder = calls_in_the_message
    with serving(tmp_path, fake_llm, ENV, {}) as process:
        yield process


def bubblewrap(client: EventClient) -> EventClient:
    if client.call("get_status")["sandbox"]["kind"] != "bubblewrap":
        pytest.skip("bubblewrap is not usable here")
    return client


def user_messages_with_the_note(fake: FakeLLM) -> list[str]:
    """The user messages of the last request the model received that carry the note."""
    last = fake.chat_requests[-1]
    texts = [m.get("content") for m in last.messages if m.get("role") == "user"]
    return [t for t in texts if isinstance(t, str) and NOTE in t]


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGINT], ids=["killed", "stopped"])
def test_a_restart_ends_the_processes_says_so_to_pages_and_tells_the_model_once(
    server: ServerProcess, fake_llm: FakeLLM, signum: int
) -> None:
    command = f"sleep 39{time.time_ns() % 10**6}"
    with connected(server.url) as client:
        bubblewrap(client)
        started, cid = run_calls(
            client, [("run_command", {"command": command, "background": True})]
        )
        assert "running in the background as p1" in started[0]["output"], started
    server.restart(signum=signum)

    with connected(server.url) as first:
        assert first.call("join", {"conversation_id": cid, "after_seq": 0})["ok"]
        exited = first.wait_for("process", TASK_SECONDS, conversation_id=cid, phase="exited")
    assert exited["process_id"] == "p1" and exited["reason"] == "server_stopped", exited
    with connected(server.url) as late:  # a page that joins later is replayed it
        assert late.call("join", {"conversation_id": cid, "after_seq": 0})["ok"]
        replayed = late.named("process", conversation_id=cid, phase="exited")
        assert [(e["process_id"], e["seq"]) for e in replayed] == [("p1", exited["seq"])]
        listed = late.call("list_processes", {"conversation_id": cid})["processes"]
        assert [(p["id"], p["end_reason"], p["running"]) for p in listed] == [
            ("p1", "server_stopped", False)
        ]

        run_calls(late, [], cid)
        told = user_messages_with_the_note(fake_llm)
        assert len(told) == 1 and f"p1 `{command}`" in told[0], told
        assert told[0].startswith("[]\n\n[Background processes")  # after the user's own text
        run_calls(late, [], cid)
        assert user_messages_with_the_note(fake_llm) == told  # once: the next message has none
        stored = late.call("get_conversation", {"conversation_id": cid})["messages"]
    users = [m for m in stored if m["role"] == "user"]
    assert [m["content"] for m in users][1:] == ["[]", "[]"]  # the user's text, as typed
    ended = [m.get("meta", {}).get("processes_ended") for m in users]
    assert ended == [None, [{"id": "p1", "command": command}], None], ended
