"""Uploads in both async modes, as a browser or a program may send them: with a length, or
in chunks (Transfer-Encoding: chunked); over the limit, each is answered 413 readably, never
with a connection cut while the client still sends."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import requests

from tests.kit.server import ServerProcess
from tests.kit.settings import TOKEN

AUTH = {"Authorization": f"Bearer {TOKEN}"}
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.server(modes=["threading", "eventlet"], env={"AGENT_UPLOAD_LIMIT_MB": "2"}),
]
CHUNK = b"chunked upload\n" * 4096  # 60 KiB


def chunks(count: int) -> Iterator[bytes]:
    for _ in range(count):
        yield CHUNK


def post(server: ServerProcess, name: str, body: bytes | Iterator[bytes]) -> requests.Response:
    return requests.post(
        f"{server.url}/api/upload?name={name}", data=body, headers=AUTH, timeout=60
    )


def test_a_chunked_upload_is_stored_whole(server: ServerProcess) -> None:
    answer = post(server, "chunked.txt", chunks(10))
    assert answer.status_code == 200, answer.text
    stored = server.workspace / answer.json()["path"]
    assert stored.read_bytes() == CHUNK * 10


@pytest.mark.parametrize("sent", ["length", "chunked"])
def test_an_upload_over_the_limit_is_answered_413(server: ServerProcess, sent: str) -> None:
    body = b"a" * (30 * 2**20) if sent == "length" else chunks(500)  # 30 MB
    answer = post(server, f"big-{sent}.txt", body)
    assert answer.status_code == 413
    assert "AGENT_UPLOAD_LIMIT_MB" in answer.json()["error"]["message"]
    assert requests.get(f"{server.url}/api/status", headers=AUTH, timeout=10).json()["ok"]
