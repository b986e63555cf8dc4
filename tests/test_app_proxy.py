"""The app proxy through the real server (`main.py web`, the local sandbox under bubblewrap, in
threading and eventlet mode) and a real app the fake model starts in the background
(tests/kit/web_app.py): open_app gives a URL on a port of its own; the token in it sets the
app's cookie and is never sent on; without it (or with another app's cookie, or a foreign
Host) the app is not reached; the workspace's cookie never reaches the app, on any request of
a keep-alive connection; bodies (chunked too) and a WebSocket pass; stopping the process
ends the route."""

from __future__ import annotations

import base64
import os
import re
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.fake_llm import Call, FakeLLM, Reply
from tests.kit import web_app
from tests.kit.clients import EventClient
from tests.kit.server import ServerProcess
from tests.kit.waits import wait_until

APP = Path(web_app.__file__).read_text()
APP_PORT = 8000

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.usefixtures("clean_fake"),
    pytest.mark.server(
        env={"AGENT_SANDBOX": "local"},
        files={"web_app.py": APP},
        modes=["threading", "eventlet"],
    ),
]


def start_app(client: EventClient, fake: FakeLLM, port: int = APP_PORT) -> tuple[str, str]:
    """A conversation whose model started web_app.py on `port` in the background; the
    conversation and the process."""
    command = f"python3 -u web_app.py {port} {client.url}"
    fake.script(
        Reply(tool_calls=[Call("run_command", {"command": command, "background": True})]),
        Reply(content="started"),
    )
    cid = client.start("start the app")
    client.wait_done(cid, 60)
    listed = wait_until(lambda: listening(client, cid, port), 30, f"a process on port {port}")
    return cid, listed["id"]


def listening(client: EventClient, cid: str, port: int) -> dict[str, Any] | None:
    ack = client.call("list_processes", {"conversation_id": cid})
    return next((p for p in ack["processes"] if p["running"] and port in p["ports"]), None)


def exchange(port: int, *requests: bytes, host: str = "127.0.0.1") -> bytes:
    """Send each request on one connection; everything answered until it closes, or until
    nothing more comes for a moment after the last request's answer began."""
    with socket.create_connection((host, port), timeout=10) as conn:
        answers = b""
        for request in requests:
            conn.sendall(request)
            answers += read_answer(conn)
        return answers


def read_answer(conn: socket.socket) -> bytes:
    """One HTTP answer (by its Content-Length), or what comes until the connection closes."""
    data = b""
    while b"\r\n\r\n" not in data:
        piece = conn.recv(65536)
        if not piece:
            return data
        data += piece
    head, _, body = data.partition(b"\r\n\r\n")
    length = re.search(rb"(?i)content-length: *(\d+)", head)
    while length is not None and len(body) < int(length.group(1)):
        piece = conn.recv(65536)
        if not piece:
            break
        body += piece
    return head + b"\r\n\r\n" + body


def get(path: str, app_port: int, *, cookie: str = "", host: str | None = None) -> bytes:
    cookie_line = f"Cookie: {cookie}\r\n" if cookie else ""
    named = host or f"127.0.0.1:{app_port}"
    return f"GET {path} HTTP/1.1\r\nHost: {named}\r\n{cookie_line}\r\n".encode()


@pytest.fixture(scope="module")
def opened(server: ServerProcess, fake: FakeLLM) -> Iterator[dict[str, Any]]:
    """The module's app, opened: its conversation, process, URL, proxy port and token."""
    from tests.kit.clients import connected

    with connected(server.url) as client:
        if client.call("get_status")["sandbox"]["kind"] != "bubblewrap":
            pytest.skip("bubblewrap is not usable here")
        cid, process_id = start_app(client, fake)
        ack = client.call("open_app", {"conversation_id": cid, "process_id": process_id})
        assert ack["ok"], ack
        url = urlsplit(ack["url"])
        token = url.query.removeprefix("agent_app_token=")
        yield {"cid": cid, "process": process_id, "url": ack["url"], "port": url.port,
               "token": token, "client": client}  # fmt: skip


def test_the_app_has_an_origin_of_its_own_and_the_token_sets_its_cookie(
    opened: dict[str, Any], server: ServerProcess
) -> None:
    url = urlsplit(opened["url"])
    assert url.hostname == "127.0.0.1" and url.port not in (server.port, APP_PORT)
    assert opened["url"] == f"http://127.0.0.1:{url.port}/?agent_app_token={opened['token']}"
    first = exchange(url.port, get(f"/x?a=1&agent_app_token={opened['token']}&b=2", url.port))
    assert first.startswith(b"HTTP/1.1 303"), first
    assert b"\r\nLocation: /x?a=1&b=2\r\n" in first
    cookie = f"agent_app_{url.port}={opened['token']}; HttpOnly; SameSite=Lax; Path=/"
    assert f"\r\nSet-Cookie: {cookie}\r\n".encode() in first
    answered = exchange(
        url.port, get("/x?a=1", url.port, cookie=f"agent_app_{url.port}={opened['token']}")
    )
    assert answered.startswith(b"HTTP/1.1 200") and answered.endswith(b"path /x?a=1"), answered
    again = opened["client"].call(
        "open_app", {"conversation_id": opened["cid"], "port": APP_PORT}
    )  # the same app: the same address
    assert again == {
        "ok": True,
        "url": opened["url"],
        "process_id": opened["process"],
        "port": APP_PORT,
    }


def not_quite(token: str) -> str:
    """The token with its last character changed (a random token may end in any one)."""
    return token[:-1] + ("y" if token.endswith("x") else "x")


def test_without_its_token_or_cookie_the_app_is_not_reached(opened: dict[str, Any]) -> None:
    port, token = opened["port"], opened["token"]
    bare = exchange(port, get("/", port))
    assert bare.startswith(b"HTTP/1.1 401") and b"Open this app from its workspace" in bare
    wrong = exchange(port, get(f"/?agent_app_token={not_quite(token)}", port))
    assert wrong.startswith(b"HTTP/1.1 401")
    other_app = exchange(port, get("/", port, cookie=f"agent_app_{port + 1}={token}"))
    assert other_app.startswith(b"HTTP/1.1 401"), "only this app's own cookie opens it"
    guessed = exchange(port, get("/", port, cookie=f"agent_app_{port}={not_quite(token)}"))
    assert guessed.startswith(b"HTTP/1.1 401")
    cookie = f"agent_app_{port}={token}"
    foreign = exchange(port, get("/", port, cookie=cookie, host=f"attacker.example:{port}"))
    assert foreign.startswith(b"HTTP/1.1 403"), "a DNS-rebinding page names its own host"
    admitted = get("/a", port, cookie=cookie)
    then_foreign = get("/b", port, cookie=cookie, host=f"attacker.example:{port}")
    mixed = exchange(port, admitted, admitted, then_foreign)
    assert mixed.count(b"HTTP/1.1 200") == 2 and b"HTTP/1.1 403" in mixed, "each is checked"
    huge = exchange(port, b"GET / HTTP/1.1\r\nX: " + b"a" * 70_000 + b"\r\n\r\n")
    assert huge.startswith(b"HTTP/1.1 400")
    smuggled = (
        f"POST /echo HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nCookie: {cookie}\r\n"
        "Content-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
    ).encode()
    assert exchange(port, smuggled).startswith(b"HTTP/1.1 400")


def test_no_workspace_cookie_reaches_the_app_on_any_request(
    opened: dict[str, Any], server: ServerProcess
) -> None:
    port, client = opened["port"], opened["client"]
    secret = f"never-sent-{os.getpid()}"
    cookies = f"agent_token={secret}; theirs=kept; agent_app_{port}={opened['token']}"
    answers = exchange(port, *[get(f"/n{i}", port, cookie=cookies) for i in range(3)])
    assert answers.count(b"HTTP/1.1 200") == 3, answers  # one keep-alive connection

    def three_logged() -> str | None:
        text = output(client, opened)
        return text if text.count("cookie: theirs=kept\n") >= 3 else None

    log = wait_until(
        three_logged,
        10,
        "the app's log of the three requests",
        details=lambda: output(client, opened),
    )
    seen = [line for line in log.splitlines() if line.startswith("cookie: ")]
    assert seen[-3:] == ["cookie: theirs=kept"] * 3, seen
    assert secret not in log and opened["token"] not in log


def test_request_bodies_pass_as_sent(opened: dict[str, Any]) -> None:
    port = opened["port"]
    head = f"Host: 127.0.0.1:{port}\r\nCookie: agent_app_{port}={opened['token']}\r\n"
    sized = f"POST /echo HTTP/1.1\r\n{head}Content-Length: 5\r\n\r\nhello".encode()
    chunked = (
        f"POST /echo HTTP/1.1\r\n{head}Transfer-Encoding: chunked\r\n\r\n"
        "3\r\nabc\r\n4;x=y\r\ndefg\r\n0\r\n\r\n"
    ).encode()
    answers = exchange(
        port, sized, chunked, get("/after", port, cookie=head.split("Cookie: ")[1].strip())
    )
    assert answers.count(b"HTTP/1.1 200") == 3, answers
    assert (
        b"got hello" in answers and b"got abcdefg" in answers and answers.endswith(b"path /after")
    )


def test_a_websocket_passes(opened: dict[str, Any]) -> None:
    port = opened["port"]
    key = base64.b64encode(os.urandom(16)).decode()
    upgrade = (
        f"GET /ws HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nCookie: agent_app_{port}={opened['token']}"
        f"\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"
        f"Sec-WebSocket-Key: {key}\r\n\r\n"
    ).encode()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(upgrade)
        head = b""
        while b"\r\n\r\n" not in head:
            head += conn.recv(1)
        assert head.startswith(b"HTTP/1.1 101"), head
        for text in (b"one", b"two" * 30):
            mask = os.urandom(4)
            conn.sendall(
                bytes([0x81, 0x80 | len(text)])
                + mask
                + bytes(b ^ mask[i % 4] for i, b in enumerate(text))
            )
            frame = b""
            while len(frame) < 2 + len(text):
                frame += conn.recv(4096)
            assert frame == bytes([0x81, len(text)]) + text


def test_stopping_the_process_ends_the_route(server: ServerProcess, fake: FakeLLM) -> None:
    from tests.kit.clients import connected

    with connected(server.url) as client:
        if client.call("get_status")["sandbox"]["kind"] != "bubblewrap":
            pytest.skip("bubblewrap is not usable here")
        cid, process_id = start_app(client, fake, 8001)
        ack = client.call("open_app", {"conversation_id": cid, "port": 8001})
        assert ack["ok"], ack
        port = urlsplit(ack["url"]).port
        token = urlsplit(ack["url"]).query.removeprefix("agent_app_token=")
        cookie = f"agent_app_{port}={token}"
        with socket.create_connection(("127.0.0.1", port), timeout=10) as held:
            held.sendall(get("/held", port, cookie=cookie))
            assert read_answer(held).startswith(b"HTTP/1.1 200")
            stopped = client.call(
                "stop_process", {"conversation_id": cid, "process_id": process_id}
            )
            assert stopped["ok"], stopped
            wait_until(lambda: refused(port), 10, "the app's port to refuse connections")
            held.settimeout(10)
            assert held.recv(1) == b"", "an open connection through the route ends too"
        missing = client.call("open_app", {"conversation_id": cid, "process_id": process_id})
        assert missing["ok"] is False and missing["error"]["code"] == "not_found", missing
        nothing = client.call("open_app", {"conversation_id": cid, "port": 9})
        assert nothing["ok"] is False and nothing["error"]["code"] == "not_found", nothing
        bad = client.call("open_app", {"conversation_id": cid})
        assert bad["ok"] is False and bad["error"]["code"] == "bad_request", bad


def refused(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    except ConnectionRefusedError:
        return True
    return False


def output(client: EventClient, opened: dict[str, Any]) -> str:
    """What the app printed so far."""
    ack = client.call(
        "process_output", {"conversation_id": opened["cid"], "process_id": opened["process"]}
    )
    assert ack["ok"], ack
    return str(ack["text"])
