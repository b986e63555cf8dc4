"""The fake model API's client side in the test kit: a chat request posted as a provider's SDK
would, and its SSE answer read apart (frames, chunks, deltas, tool-call fragments)."""

from __future__ import annotations

import json
from typing import Any

import requests

from tests.fake_llm import FakeLLM

USER = {"role": "user", "content": "hi"}


def post(
    fake: FakeLLM, body: dict[str, Any], *, key: str | None = "default", timeout: float = 10
) -> requests.Response:
    key = fake.api_key if key == "default" else key
    headers = {} if key is None else {"Authorization": f"Bearer {key}"}
    return requests.post(
        f"{fake.base_url}/chat/completions", json=body, headers=headers, timeout=timeout
    )


def chat(fake: FakeLLM, messages: list[dict[str, Any]] | None = None, **extra: Any) -> dict:
    return {"model": fake.model, "messages": messages or [USER], **extra}


def frames(response: requests.Response) -> list[str]:
    """The SSE frames exactly as sent (each ended by a blank line)."""
    text = response.content.decode()
    assert text.endswith("\n\n")
    return text[:-2].split("\n\n")


def chunks(response: requests.Response) -> list[dict[str, Any]]:
    return [
        json.loads(f.removeprefix("data: ")) for f in frames(response) if f.startswith("data: {")
    ]


def deltas(response: requests.Response) -> list[dict[str, Any]]:
    return [c["choices"][0]["delta"] for c in chunks(response) if c["choices"]]


def joined(response: requests.Response, key: str) -> str:
    return "".join(d.get(key) or "" for d in deltas(response))


def tool_fragments(response: requests.Response) -> list[dict[str, Any]]:
    return [f for d in deltas(response) for f in d.get("tool_calls") or []]
