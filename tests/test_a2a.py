"""A2A: the real server process's endpoint driven by the a2a SDK's own client, in both modes."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import Client, ClientConfig, create_client
from a2a.compat.v0_3.types import AgentCard as AgentCardV03
from a2a.types import (
    AgentCard,
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    TaskState,
)
from google.protobuf import json_format

from a2a_server.card import CARD_PATHS, agent_card
from core.agent_loader import load_agents
from core.agent_specs import SHIPPED_AGENTS
from tests.fake_llm import FakeLLM, Reply, long_answer
from tests.kit.a2a import a2a_env, history
from tests.kit.clients import EventClient
from tests.kit.server import ServerProcess, session_from
from tests.kit.settings import TOKEN
from tests.kit.waits import wait_until
from utils.settings import WRONG_TOKEN_LIMIT

ANSWER = "Four, as it has always been."
LONG = long_answer("word", 400)  # 20 s of streaming if not stopped
AGENTS = {"general", "research", "coder", "data", "supervisor"}
PLANTED = "name: planted\ndescription: PLANTED-DESCRIPTION\nsystem_prompt: PLANTED-PROMPT\n"
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.usefixtures("clean_fake"),
    pytest.mark.server(
        # a task wrote these: an agent of its own, and the general agent described anew
        files={
            ".agents/agents/planted.yaml": PLANTED,
            ".agents/agents/general.yaml": "name: general\ndescription: REWRITTEN-GENERAL\n",
        },
        modes=["threading", "eventlet"],
    ),
]


@pytest.fixture(scope="module")
def server_env(async_mode: str) -> dict[str, str]:
    """`a2a_env`, made for each async mode's server (a port of its own)."""
    return a2a_env()


def a2a(server: ServerProcess) -> str:
    """The server's A2A endpoint (and base URL of its card)."""
    return f"http://127.0.0.1:{server.env['AGENT_A2A_PORT']}/"


@asynccontextmanager
async def sdk_client(
    url: str, *, streaming: bool = True, on_request: Callable[[httpx.Request], Any] | None = None
) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    hooks = {"request": [on_request]} if on_request else {}
    async with httpx.AsyncClient(headers=headers, timeout=30, event_hooks=hooks) as http:
        config = ClientConfig(streaming=streaming, httpx_client=http)
        yield await create_client(url, client_config=config)


def user_message(text: str, context_id: str = "") -> SendMessageRequest:
    message = Message(role=Role.ROLE_USER, message_id=f"m-{text[:8]}", parts=[Part(text=text)])
    if context_id:
        message.context_id = context_id
    return SendMessageRequest(message=message)


async def collect(client: Client, request: SendMessageRequest) -> list[StreamResponse]:
    return [response async for response in client.send_message(request)]


def kinds(responses: list[StreamResponse]) -> list[str]:
    """task / working / artifact / completed ..., one per response."""
    names = []
    for response in responses:
        kind = response.WhichOneof("payload")
        if kind == "status_update":
            state = response.status_update.status.state
            names.append(TaskState.Name(state).removeprefix("TASK_STATE_").lower())
        else:
            names.append(kind.removesuffix("_update"))
    return names


def test_the_card_is_public_and_describes_the_agents_and_the_bearer_scheme(
    server: ServerProcess,
) -> None:
    answer = httpx.get(a2a(server) + ".well-known/agent-card.json")
    assert answer.status_code == 200
    card = answer.json()
    json_format.Parse(answer.text, AgentCard(), ignore_unknown_fields=False)  # strictly 1.0
    assert [list(scheme) for scheme in card["securitySchemes"].values()] == [
        ["httpAuthSecurityScheme"]
    ]
    assert {skill["id"] for skill in card["skills"]} >= AGENTS
    assert card["capabilities"]["streaming"] is True
    assert card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"] == "bearer"
    assert card["securityRequirements"] == [{"schemes": {"bearer": {}}}]
    interfaces = [
        (i["url"], i["protocolBinding"], i["protocolVersion"]) for i in card["supportedInterfaces"]
    ]
    assert interfaces == [(a2a(server), "JSONRPC", "1.0"), (a2a(server), "JSONRPC", "0.3")]
    assert TOKEN not in answer.text and str(server.workspace) not in answer.text
    unchanged = {"If-None-Match": answer.headers["ETag"]}
    assert httpx.get(answer.url, headers=unchanged).status_code == 304


def test_the_public_cards_show_no_text_a_task_wrote_and_its_agent_still_runs(
    server: ServerProcess, fake: FakeLLM
) -> None:
    for path in CARD_PATHS:
        card = httpx.get(a2a(server) + path.lstrip("/")).json()
        assert {skill["id"] for skill in card["skills"]} >= AGENTS, path
        shown = json.dumps(card)
        assert "planted" not in shown and "PLANTED" not in shown, path
        assert "REWRITTEN" not in shown, path  # the general agent as the shipped file says
    fake.script(Reply(content=ANSWER))
    request = user_message("Who are you?")
    request.message.metadata.update({"agent": "planted"})

    async def run() -> Any:
        async with sdk_client(a2a(server), streaming=False) as sdk:
            return (await collect(sdk, request))[-1].task

    task = asyncio.run(run())
    assert TaskState.Name(task.status.state) == "TASK_STATE_COMPLETED"
    assert "PLANTED-PROMPT" in str(fake.chat_requests[-1].messages)  # named, it still runs


def test_a_trusted_workspaces_agents_are_on_the_card(tmp_path: Path) -> None:
    (tmp_path / ".agents" / "agents").mkdir(parents=True)
    (tmp_path / ".agents" / "agents" / "planted.yaml").write_text(PLANTED)
    catalog = load_agents([SHIPPED_AGENTS], tmp_path)
    assert "planted" in catalog.agents
    for trust, listed in ((False, False), (True, True)):
        card = agent_card(catalog, "general", "http://127.0.0.1:1/", trust_workspace=trust)
        assert ("planted" in {skill.id for skill in card.skills}) is listed, trust


def test_a_1_0_client_picks_the_1_0_interface(server: ServerProcess, fake: FakeLLM) -> None:
    fake.script(Reply(content=ANSWER))
    sent: list[tuple[str, str]] = []

    async def record(request: httpx.Request) -> None:
        if request.method == "POST":
            sent.append((json.loads(request.content)["method"], request.headers["a2a-version"]))

    async def run() -> Any:
        async with sdk_client(a2a(server), streaming=False, on_request=record) as sdk:
            return (await collect(sdk, user_message("Hello from 1.0")))[-1].task

    task = asyncio.run(run())
    assert TaskState.Name(task.status.state) == "TASK_STATE_COMPLETED"
    assert sent == [("SendMessage", "1.0")]


def list_tasks(server: ServerProcess, params: dict[str, Any]) -> dict[str, Any]:
    """A 1.0 `ListTasks` request's JSON-RPC answer."""
    answer = httpx.post(
        a2a(server),
        headers={"Authorization": f"Bearer {TOKEN}", "A2A-Version": "1.0"},
        json={"jsonrpc": "2.0", "id": 7, "method": "ListTasks", "params": params},
        timeout=30,
    )
    return dict(answer.json())


def test_list_tasks_filters_by_status_and_refuses_an_unknown_one(
    server: ServerProcess, fake: FakeLLM
) -> None:
    fake.script(Reply(content=ANSWER))

    async def run() -> Any:
        async with sdk_client(a2a(server), streaming=False) as sdk:
            return (await collect(sdk, user_message("One to list")))[-1].task

    task = asyncio.run(run())
    done = list_tasks(server, {"status": "TASK_STATE_COMPLETED"})["result"].get("tasks", [])
    assert task.id in [t["id"] for t in done]
    assert {t["status"]["state"] for t in done} == {"TASK_STATE_COMPLETED"}
    failed = list_tasks(server, {"status": "TASK_STATE_FAILED"})["result"].get("tasks", [])
    assert task.id not in [t["id"] for t in failed]
    for bogus in ("TASK_STATE_BOGUS", "completed", 99):
        answer = list_tasks(server, {"status": bogus})
        assert answer["id"] == 7 and answer["error"]["code"] == -32602, answer
        assert f"unknown task status {bogus!r}" in answer["error"]["message"]
        assert "TASK_STATE_COMPLETED" in answer["error"]["message"]


@pytest.mark.parametrize("token", [None, "wrong-token-0123456789"])
def test_a_request_without_or_with_a_wrong_token_is_refused(
    server: ServerProcess, token: str | None
) -> None:
    headers = {"A2A-Version": "1.0"} | ({"Authorization": f"Bearer {token}"} if token else {})
    body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}}
    answer = httpx.post(a2a(server), json=body, headers=headers)
    assert answer.status_code == 401
    assert answer.headers["www-authenticate"] == "Bearer"
    assert answer.json()["error"]["code"] == "unauthorized"


def test_a_guesser_on_the_owners_address_cannot_lock_the_owner_out(server: ServerProcess) -> None:
    shared = session_from("127.0.0.31")  # the owner and the guesser: one address (a proxy)
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}}
    wrong = {"A2A-Version": "1.0", "Authorization": "Bearer wrong-token-0123456789"}
    guesses = [
        shared.post(a2a(server), json=body, headers=wrong, timeout=10)
        for _ in range(WRONG_TOKEN_LIMIT + 2)
    ]
    assert [g.status_code for g in guesses] == [401] * WRONG_TOKEN_LIMIT + [429, 429]
    assert guesses[-1].json()["error"]["code"] == "too_many_attempts"
    assert int(guesses[-1].headers["Retry-After"]) > 0
    right = {"A2A-Version": "1.0", "Authorization": f"Bearer {TOKEN}"}
    answer = shared.post(a2a(server), json=body, headers=right, timeout=10)
    assert answer.status_code == 200 and answer.json()["id"] == 1


def test_the_web_cookie_opens_nothing_here(server: ServerProcess) -> None:
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}}
    browser = {"A2A-Version": "1.0", "Cookie": f"agent_token={TOKEN}", "Origin": "null"}
    answer = session_from("127.0.0.32").post(a2a(server), json=body, headers=browser, timeout=10)
    assert answer.status_code == 401


def test_a_task_is_a_conversation_the_page_sees_live(
    server: ServerProcess, fake: FakeLLM, client: EventClient
) -> None:
    fake.script(Reply(content="First answer."), Reply(content=ANSWER, chunk_size=4))

    async def first() -> Any:
        async with sdk_client(a2a(server), streaming=False) as sdk:
            return (await collect(sdk, user_message("What is 2+2?")))[-1].task

    task = asyncio.run(first())
    assert TaskState.Name(task.status.state) == "TASK_STATE_COMPLETED"
    assert [p.text for a in task.artifacts for p in a.parts] == ["First answer."]
    conversation_id = task.metadata["conversation_id"]
    listed = client.call("list_conversations")["conversations"]
    assert conversation_id in [c["id"] for c in listed]
    seq = client.call("get_conversation", {"conversation_id": conversation_id})["seq"]
    ack = client.call("join", {"conversation_id": conversation_id, "after_seq": seq})
    assert ack["ok"], ack

    async def follow_up() -> list[StreamResponse]:
        async with sdk_client(a2a(server)) as sdk:
            return await collect(sdk, user_message("And again?", task.context_id))

    responses = asyncio.run(follow_up())
    events = client.wait_done(conversation_id)
    tokens = "".join(e.payload["text"] for e in events if e.name == "token")
    assert tokens == ANSWER  # the page saw the second task stream, token by token
    records = history(client, conversation_id)
    assert [(r["role"], r["content"]) for r in records] == [
        ("user", "What is 2+2?"),
        ("assistant", "First answer."),
        ("user", "And again?"),
        ("assistant", ANSWER),
    ]
    assert responses[-1].status_update.context_id == task.context_id


def test_a_stream_reports_task_working_artifacts_completed_and_get_task_agrees(
    server: ServerProcess, fake: FakeLLM
) -> None:
    fake.script(Reply(content=ANSWER, chunk_size=3, delay=0.01))

    async def run() -> tuple[list[StreamResponse], Any]:
        async with sdk_client(a2a(server)) as sdk:
            responses = await collect(sdk, user_message("Stream it"))
            task = await sdk.get_task(GetTaskRequest(id=responses[0].task.id))
            return responses, task

    responses, task = asyncio.run(run())
    names = kinds(responses)
    assert names[:3] == ["task", "working", "artifact"], names
    assert names[-1] == "completed" and set(names[2:-1]) == {"artifact"}, names
    updates = [r.artifact_update for r in responses if r.HasField("artifact_update")]
    assert len(updates) >= 3  # streamed in chunks, not at the end
    streamed = "".join(u.artifact.parts[0].text for u in updates[:-1])
    assert streamed == ANSWER and updates[-1].last_chunk and not updates[-1].append
    assert updates[-1].artifact.parts[0].text == ANSWER  # the whole answer replaces the chunks
    assert TaskState.Name(task.status.state) == "TASK_STATE_COMPLETED"
    assert [p.text for p in task.artifacts[0].parts] == [ANSWER]


def test_cancel_stops_the_running_loop_and_the_history_says_so(
    server: ServerProcess, fake: FakeLLM, client: EventClient
) -> None:
    fake.script(Reply(content=LONG, chunk_size=5, delay=0.05))

    async def run() -> list[StreamResponse]:
        async with sdk_client(a2a(server)) as sdk, sdk_client(a2a(server)) as other:
            seen: list[StreamResponse] = []
            async for response in sdk.send_message(user_message("Write a lot")):
                seen.append(response)
                if response.HasField("artifact_update"):
                    await other.cancel_task(CancelTaskRequest(id=seen[0].task.id))
                    break
            return seen

    async def get_task() -> Any:
        async with sdk_client(a2a(server)) as sdk:
            return await sdk.get_task(GetTaskRequest(id=seen[0].task.id))

    def settled() -> Any:
        task = asyncio.run(get_task())
        return task if TaskState.Name(task.status.state) != "TASK_STATE_WORKING" else None

    seen = asyncio.run(run())
    task = wait_until(settled, 10, "the cancelled task to stop working")
    assert TaskState.Name(task.status.state) == "TASK_STATE_CANCELED"
    conversation_id = seen[1].status_update.metadata["conversation_id"]

    def stopped() -> dict[str, Any] | None:
        answers = [r for r in history(client, conversation_id) if r["role"] == "assistant"]
        return answers[0] if answers else None

    answer = wait_until(stopped, 10, "the interrupted answer recorded")
    assert answer["meta"]["interrupted"] == "cancelled"
    assert 0 < len(answer["content"]) < len(LONG)


def rejection(responses: list[StreamResponse]) -> tuple[str, str, dict[str, Any]]:
    """The final status of a rejected task: its state, its message and its metadata.error."""
    update = responses[-1].status_update
    metadata = json_format.MessageToDict(update.metadata)
    text = "".join(part.text for part in update.status.message.parts)
    return TaskState.Name(update.status.state), text, metadata["error"]


def test_a_task_it_cannot_take_is_rejected_saying_why_with_the_error_code(
    server: ServerProcess, fake: FakeLLM
) -> None:
    fake.script(Reply(content=LONG, chunk_size=5, delay=0.05))
    unknown = user_message("Who are you?")
    unknown.message.metadata.update({"agent": "nobody"})

    async def run() -> tuple[list[StreamResponse], ...]:
        async with sdk_client(a2a(server)) as sdk:
            refused = await collect(sdk, unknown)
            empty = await collect(sdk, user_message("   "))
            first: list[StreamResponse] = []
            async for response in sdk.send_message(user_message("Write a lot")):
                first.append(response)
                if response.HasField("artifact_update"):  # it runs: its context is busy
                    break
            busy = await collect(sdk, user_message("And more", first[0].task.context_id))
            await sdk.cancel_task(CancelTaskRequest(id=first[0].task.id))
            return refused, empty, busy, first

    async def state_of(task_id: str) -> str:
        async with sdk_client(a2a(server)) as sdk:
            return TaskState.Name((await sdk.get_task(GetTaskRequest(id=task_id))).status.state)

    refused, empty, busy, first = asyncio.run(run())
    wait_until(
        lambda: asyncio.run(state_of(first[0].task.id)) == "TASK_STATE_CANCELED",
        10,
        "the busy context's task stopped",
    )
    state, text, error = rejection(refused)
    assert state == "TASK_STATE_REJECTED" and text.startswith("no agent 'nobody'; the agents are:")
    assert error == {"code": "not_found", "message": text}
    state, text, error = rejection(empty)
    assert (state, error["code"]) == ("TASK_STATE_REJECTED", "invalid")
    assert text == "send the task as text of 1 to 200,000 characters"
    state, text, error = rejection(busy)
    assert state == "TASK_STATE_REJECTED"
    assert error == {
        "code": "busy",
        "message": "a task is already running in this context's conversation",
    }


def test_a_0_3_client_finds_the_endpoint_on_the_0_3_card_and_its_methods_are_accepted(
    server: ServerProcess, fake: FakeLLM
) -> None:
    card = AgentCardV03.model_validate(httpx.get(a2a(server) + ".well-known/agent.json").json())
    assert (card.url, card.preferred_transport, card.protocol_version) == (
        a2a(server),
        "JSONRPC",
        "0.3",
    )
    fake.script(Reply(content=ANSWER))
    headers = {"Authorization": f"Bearer {TOKEN}"}  # no A2A-Version header: a 0.3 client
    message = {
        "kind": "message",
        "role": "user",
        "messageId": "old-1",
        "parts": [{"kind": "text", "text": "Hello from 0.3"}],
    }
    sent = httpx.post(
        card.url,
        headers=headers,
        timeout=30,
        json={"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": message}},
    )
    task = sent.json()["result"]
    assert (task["kind"], task["status"]["state"]) == ("task", "completed"), sent.text
    got = httpx.post(
        card.url,
        headers=headers,
        json={"jsonrpc": "2.0", "id": 2, "method": "tasks/get", "params": {"id": task["id"]}},
    )
    artifact = got.json()["result"]["artifacts"][0]
    assert artifact["parts"] == [{"kind": "text", "text": ANSWER}]
