"""The model API's part of the test kit: settings and an `ApiClient` on a fake model, one
request's stream read to its end, and the user message the requests start from."""

from __future__ import annotations

import socket
from collections.abc import Sequence
from typing import Any

from model.api_client import ApiClient
from model.completion import Completion, StreamEnd, StreamItem
from model.messages import ChatMessage
from model.providers import resolve_provider
from tests.fake_llm import FakeLLM
from tests.kit.settings import make_settings
from utils.cancel import CancelToken


class TreeMessage(ChatMessage):
    """A record as far as the client is given one here: a message and its place in the tree."""

    parent_id: str | None


USER: TreeMessage = {"id": "m1", "parent_id": None, "role": "user", "content": "hi", "meta": {}}


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
