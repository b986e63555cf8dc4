"""The `call_agent` tool calling the real server's own A2A endpoint, in both async modes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from modules.results import ToolError
from modules.tools.remote_agents import CallAgentArgs, RemoteAgents
from tests.fake_llm import Call, FakeLLM, Reply, long_answer
from tests.kit.a2a import a2a_env, history
from tests.kit.clients import EventClient
from tests.kit.server import ServerProcess, free_port
from tests.kit.waits import wait_until
from utils.settings import RemoteAgent

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.usefixtures("clean_fake"),
    pytest.mark.server(modes=["threading", "eventlet"]),
]


@pytest.fixture(scope="module")
def server_env(async_mode: str) -> dict[str, str]:
    """`a2a_env`, made for each async mode's server (a port of its own)."""
    return a2a_env()


def test_call_agent_streams_the_remote_reply_into_the_tool_card(
    server: ServerProcess, fake: FakeLLM, client: EventClient
) -> None:
    remote_answer = "The remote agent says: four, and here is why, at some length."
    fake.script(
        Reply(tool_calls=[Call("call_agent", {"name": "peer", "message": "What is 2+2?"})]),
        Reply(content=remote_answer, chunk_size=6, delay=0.02),  # the remote task's answer
        Reply(content="Peer says four."),
    )
    conversation_id = client.start("Ask the peer what 2+2 is")
    events = client.wait_done(conversation_id, timeout=30)
    calls = [e.payload for e in events if e.name == "tool" and e.payload["name"] == "call_agent"]
    outputs = [c["delta"] for c in calls if c["phase"] == "output"]
    result = next(c for c in calls if c["phase"] == "result")
    assert result["ok"] and result["output"] == remote_answer
    assert len(outputs) >= 3 and remote_answer in "".join(outputs)  # live, in pieces
    assert [c["phase"] for c in calls].index("output") < [c["phase"] for c in calls].index("result")
    tools = {t["function"]["name"]: t["function"] for t in fake.chat_requests[-1].body["tools"]}
    assert (
        "- peer: An LLM agent working in one workspace folder" in tools["call_agent"]["description"]
    )
    assert events[-1].payload["reason"] == "complete"


def test_stopping_a_call_agent_task_cancels_the_remote_task(
    server: ServerProcess, fake: FakeLLM, client: EventClient
) -> None:
    fake.script(
        Reply(tool_calls=[Call("call_agent", {"name": "peer", "message": "Write slowly"})]),
        Reply(content=long_answer("slow", 400), chunk_size=5, delay=0.05),  # the remote task: 20 s
    )
    conversation_id = client.start("Ask the peer to write slowly")
    client.wait_until(
        lambda events: any(e.name == "tool" and e.payload.get("phase") == "output" for e in events),
        what="the remote reply streaming",
    )
    assert client.call("cancel", {"conversation_id": conversation_id})["ok"]
    assert client.wait_done(conversation_id)[-1].payload["reason"] == "cancelled"

    def remote_stopped() -> bool:
        for listed in client.call("list_conversations")["conversations"]:
            records = history(client, listed["id"])
            if records[0]["content"] == "Write slowly" and len(records) > 1:
                return records[1]["meta"].get("interrupted") == "cancelled"
        return False

    wait_until(remote_stopped, 10, "the remote task cancelled and recorded")


def test_call_agent_with_a_wrong_token_reports_the_refusal(
    server: ServerProcess, fake: FakeLLM, client: EventClient
) -> None:
    fake.script(
        Reply(tool_calls=[Call("call_agent", {"name": "stranger", "message": "Hi"})]),
        Reply(content="It refused."),
    )
    conversation_id = client.start("Ask the stranger")
    events = client.wait_done(conversation_id, timeout=30)
    result = next(e.payload for e in events if e.name == "tool" and e.payload["phase"] == "result")
    assert not result["ok"] and "401" in result["output"]
    assert "token in remote_agents" in result["output"]


def test_a_remote_agent_whose_card_cannot_be_read_is_listed_with_the_reason(
    tmp_path: Path,
) -> None:
    closed = f"http://127.0.0.1:{free_port()}"
    remotes = RemoteAgents(
        [
            RemoteAgent(name="gone", url=closed),
            RemoteAgent(name="known", url=closed, description="Knows things."),
        ],
        card_timeout=2,
    )
    description = remotes.tools()["call_agent"].description
    assert "- known: Knows things." in description
    assert "- gone: (its Agent Card could not be read:" in description
    no_context: Any = None  # an unknown name is refused before the context is used
    with pytest.raises(
        ToolError, match="No remote agent 'nobody'; the remote agents are: gone, known"
    ):
        remotes.call_agent(no_context, CallAgentArgs(name="nobody", message="hi"))
