"""The model API's part of the test kit: settings and an `ApiClient` on a fake model, one
request's stream read to its end, the user message the requests start from, and a responder
that makes the calls a user message lists (`calls_in_the_message`, sent by `run_calls`)."""

from __future__ import annotations

import json
import socket
from collections.abc import Sequence
from typing import Any

from model.api_client import ApiClient
from model.completion import Completion, StreamEnd, StreamItem
from model.messages import ChatMessage
from model.providers import resolve_provider
from tests.fake_llm import Call, FakeLLM, Reply
from tests.fake_llm.replies import RecordedRequest, Response
from tests.kit.clients import EventClient
from tests.kit.settings import make_settings
from utils.cancel import CancelToken


class TreeMessage(ChatMessage):
    """A record as far as the client is given one here: a message and its place in the tree."""

    parent_id: str | None


USER: TreeMessage = {"id": "m1", "parent_id": None, "role": "user", "content": "hi", "meta": {}}


def calls_in_the_message(request: RecordedRequest) -> Response:
    """The user message's first line is a JSON list of [tool, arguments] (what the server
    adds to it for the model follows on later lines); the model calls them one after another,
    then says it is done."""
    messages = request.messages
    last_user = max(i for i, m in enumerate(messages) if m.get("role") == "user")
    done = sum(1 for m in messages[last_user:] if m.get("role") == "tool")
    steps = json.loads(request.last_user_text.split("\n", 1)[0])
    if done >= len(steps):
        return Reply(content="done")
    name, arguments = steps[done]
    return Reply(tool_calls=[Call(name, arguments, id=f"call_{last_user}_{done}")])


def run_calls(
    client: EventClient,
    steps: list[tuple[str, dict[str, Any]]],
    cid: str | None = None,
    timeout: float = 90,
) -> tuple[list[dict[str, Any]], str]:
    """One task making these calls (on `calls_in_the_message`); their result events'
    payloads, and the conversation."""
    before = 0 if cid is None else len(client.dones(cid))
    cid = client.start(json.dumps(steps), cid)
    events = client.wait_done(cid, timeout, count=before + 1)
    results = [e.payload for e in events if e.name == "tool" and e.payload["phase"] == "result"]
    results = results[-len(steps) :]  # the log holds the earlier tasks' too
    assert len(results) == len(steps), events
    return results, cid


def make_client(fake: FakeLLM, **overrides: Any) -> ApiClient:
    settings = make_settings(fake, **({"max_retries": 2, "request_timeout": 5} | overrides))
    return ApiClient(resolve_provider(settings), settings)


def run(
    client: ApiClient,
    messages: Sequence[ChatMessage] | None = None,
    *,
    thinking: bool = False,
    tools: list[dict[str, Any]] | None = None,
    cancel: CancelToken | None = None,
) -> list[StreamItem]:
    return list(
        client.stream(
            messages or [USER], tools or [], thinking=thinking, cancel=cancel or CancelToken()
        )
    )


def completion(items: list[StreamItem]) -> Completion:
    assert isinstance(items[-1], StreamEnd)
    return items[-1].completion


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
