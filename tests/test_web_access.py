"""Who reaches the web workspace: Host names, the Origin of whatever changes something,
wrong-token throttling that never locks the right token out, what errors echo, the
Content-Security-Policy and JSON answers on every API path (hardening, docs/protocol.md §3)."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
import requests
import socketio

from tests.fake_llm import FakeLLM
from tests.kit.clients import StockSocketIOClient, Web, connected
from tests.kit.server import ServerProcess, agent_argv, agent_env, free_port, session_from
from tests.kit.settings import TOKEN
from utils.settings import WRONG_TOKEN_LIMIT
from web.access import HostGuard, host_name, origin_checker

AUTH = {"Authorization": f"Bearer {TOKEN}"}
WRONG = {"Authorization": "Bearer wrong-token-0123456789"}
COOKIE = {"Cookie": f"agent_token={TOKEN}"}  # what a browser sends along, from any page
FOREIGN = [  # what a page elsewhere can make a browser send
    {"Origin": "http://127.0.0.1:8080", "Sec-Fetch-Site": "same-site"},  # another port here
    {"Origin": "http://localhost:8080"},
    {"Origin": "null"},  # a sandboxed frame, a file, a redirect
    {"Sec-Fetch-Site": "cross-site"},
    {"Sec-Fetch-Site": "same-site"},
]
CHANGING = ("POST", "PUT", "PATCH", "DELETE")


@pytest.mark.parametrize(
    ("header", "accepted"),
    [
        ("127.0.0.1:5000", True),
        ("localhost:5000", True),
        ("LOCALHOST", True),
        ("[::1]:5000", True),
        ("127.8.9.10", True),
        ("app.localhost:5000", True),
        ("attacker.example:5000", False),
        ("attacker.example", False),
        ("192.168.1.5:5000", False),
        ("localhost.attacker.example", False),
        ("", False),
        ("127.0.0.1.nip.io:5000", False),
    ],
)
def test_bound_to_loopback_only_loopback_names_pass(header: str, accepted: bool) -> None:
    guard = HostGuard(lambda e, s: [], bind_host="127.0.0.1", allowed=[])
    assert guard.accepts(header) is accepted


def test_configured_names_pass_and_a_public_bind_without_a_list_takes_any() -> None:
    listed = HostGuard(lambda e, s: [], bind_host="0.0.0.0", allowed=["agent.example.org"])
    assert listed.accepts("agent.example.org:443") and listed.accepts("127.0.0.1")
    assert not listed.accepts("other.example.org")
    assert HostGuard(lambda e, s: [], bind_host="0.0.0.0", allowed=[]).accepts("anything:80")
    assert host_name("[::1]:80") == "::1" and host_name("Example.ORG:8080") == "example.org"


@pytest.mark.parametrize("path", ["/", "/api/status", "/socket.io/?EIO=4&transport=polling"])
def test_a_foreign_host_is_refused_with_403_even_with_the_token(web: Web, path: str) -> None:
    answer = web.http().get(path, headers={**AUTH, "Host": "rebind.attacker.example:5000"})
    assert answer.status_code == 403
    assert answer.get_json()["error"]["code"] == "forbidden_host"
    assert web.http().get("/api/status", headers=AUTH).status_code == 200


def test_the_socket_handshake_checks_the_host_on_the_real_server(server: ServerProcess) -> None:
    handshake = f"{server.url}/socket.io/?EIO=4&transport=polling"
    refused = requests.get(handshake, headers={"Host": "evil.example"}, timeout=10)
    assert refused.status_code == 403
    assert requests.get(handshake, timeout=10).status_code == 200
    assert requests.get(f"{server.url}/api/status", headers=AUTH, timeout=10).ok


def test_an_oversized_socket_payload_is_dropped_and_the_server_keeps_serving(
    server: ServerProcess,
) -> None:
    with connected(server.url) as client:
        client.emit("get_conversation", {"conversation_id": "x" * 2_000_000})
        client.wait_until(lambda _: not client.connected, 10, "the server to drop us")
    with connected(server.url) as again:
        assert again.call("get_status")["ok"] is True


@pytest.mark.parametrize(
    ("origin", "fetch_site", "accepted"),
    [
        (None, None, True),  # not a browser
        (None, "none", True),  # typed in, a bookmark
        ("http://localhost", "same-origin", True),
        ("HTTP://LOCALHOST/", None, True),
        ("http://allowed.example", "cross-site", True),
        ("http://localhost:8080", "same-site", False),
        ("http://localhost:8080", None, False),
        ("https://localhost", None, False),
        ("http://localhost", "same-site", False),
        ("http://evil.example", "cross-site", False),
        ("null", None, False),
        (None, "cross-site", False),
        (None, "same-site", False),
    ],
)
def test_the_origin_check(origin: str | None, fetch_site: str | None, accepted: bool) -> None:
    check = origin_checker(["http://allowed.example", "null"])
    environ = {"wsgi.url_scheme": "http", "HTTP_HOST": "localhost"}
    if fetch_site is not None:
        environ["HTTP_SEC_FETCH_SITE"] = fetch_site
    assert check(origin, environ) is accepted


def test_wrong_tokens_are_logged_and_past_the_limit_told_to_wait(web: Web) -> None:
    http = web.http()
    for _ in range(WRONG_TOKEN_LIMIT):
        assert http.get("/api/status", headers=WRONG).status_code == 401
    slowed = http.get("/api/status", headers=WRONG)
    assert slowed.status_code == 429 and int(slowed.headers["Retry-After"]) > 0
    assert slowed.get_json()["error"]["code"] == "too_many_attempts"
    assert http.get("/api/status", headers=AUTH).status_code == 200  # the owner still gets in
    other = web.app.test_client()
    other.environ_base["REMOTE_ADDR"] = "127.0.0.2"
    assert other.get("/api/status", headers=WRONG).status_code == 401  # only that address
    lines = (web.data_dir / "logs" / "agent.jsonl").read_text().splitlines()
    refused = [json.loads(x)["remote"] for x in lines if "missing or wrong token" in x]
    assert refused == ["127.0.0.1"] * WRONG_TOKEN_LIMIT + ["127.0.0.2"]  # waits: not logged


def test_a_test_rig_may_raise_the_wrong_token_limit(make_web: Callable[..., Web]) -> None:
    """AGENT_WRONG_TOKEN_LIMIT: a rig that sends wrong tokens on purpose (the A2A TCK)."""
    http = make_web(wrong_token_limit=WRONG_TOKEN_LIMIT * 3).http()
    answers = [
        http.get("/api/status", headers=WRONG).status_code for _ in range(WRONG_TOKEN_LIMIT * 3 + 1)
    ]
    assert answers == [401] * WRONG_TOKEN_LIMIT * 3 + [429]


def test_a_guesser_on_the_owners_address_cannot_lock_the_owner_out(server: ServerProcess) -> None:
    shared = session_from("127.0.0.21")  # the owner and the guesser: one address (a proxy)
    status = f"{server.url}/api/status"
    guesses = [shared.get(status, headers=WRONG, timeout=10) for _ in range(WRONG_TOKEN_LIMIT + 2)]
    assert [g.status_code for g in guesses] == [401] * WRONG_TOKEN_LIMIT + [429, 429]
    assert int(guesses[-1].headers["Retry-After"]) > 0
    assert shared.get(status, headers=AUTH, timeout=10).status_code == 200
    opened = shared.get(f"{server.url}/?token={TOKEN}", timeout=10)
    assert opened.status_code == 200 and shared.get(status, timeout=10).status_code == 200
    owner = StockSocketIOClient(server.url, transports=["polling"], http_session=shared).connect()
    assert owner.call("get_status")["ok"] is True
    owner.disconnect()
    guesser = StockSocketIOClient(
        server.url, token="wrong", transports=["polling"], http_session=shared
    )
    refusals: list[dict] = []
    guesser.sio.on("connect_error", refusals.append)
    with pytest.raises(socketio.exceptions.ConnectionError):
        guesser.connect()
    assert refusals[0]["data"]["code"] == "too_many_attempts"
    assert refusals[0]["data"]["retry_after"] > 0


def changing_requests(web: Web) -> list[tuple[str, str]]:
    """Every route of the app, and the Socket.IO path, with every method that changes state."""
    paths = {re.sub(r"<[^>]+>", "x", rule.rule) for rule in web.app.url_map.iter_rules()}
    paths.add("/socket.io/?EIO=4&transport=polling")
    return [(method, path) for path in sorted(paths) for method in CHANGING]


@pytest.mark.parametrize("foreign", FOREIGN)
def test_every_route_refuses_a_change_from_a_foreign_origin(
    server: ServerProcess, web: Web, foreign: dict[str, str]
) -> None:
    for method, path in changing_requests(web):
        answer = requests.request(
            method, server.url + path, headers={**COOKIE, **foreign}, timeout=10
        )
        assert answer.status_code == 403, (method, path)
        assert answer.json()["error"]["code"] == "forbidden_origin", (method, path)


@pytest.mark.parametrize("sender", ["not a browser", "typed in", "its own page"])
def test_every_route_takes_a_change_from_its_own_page_or_no_browser(
    server: ServerProcess, web: Web, sender: str
) -> None:
    own = {
        "not a browser": {},
        "typed in": {"Sec-Fetch-Site": "none"},
        "its own page": {"Origin": server.url, "Sec-Fetch-Site": "same-origin"},
    }[sender]
    for method, path in changing_requests(web):
        answer = requests.request(method, server.url + path, headers={**COOKIE, **own}, timeout=10)
        assert answer.status_code != 403, (method, path, answer.text)


def test_a_listed_origin_may_upload_and_null_never(make_web: Callable[..., Web]) -> None:
    browser = make_web(allowed_origins=["http://tools.example", "null"]).http()
    browser.set_cookie("agent_token", TOKEN)
    sent = {"data": b"hello\n", "query_string": {"name": "note.txt"}}
    listed = {"Origin": "http://tools.example", "Sec-Fetch-Site": "cross-site"}
    assert browser.post("/api/upload", headers=listed, **sent).get_json()["ok"] is True
    assert browser.post("/api/upload", headers={"Origin": "null"}, **sent).status_code == 403


def test_errors_echo_little_of_a_huge_id(web: Web) -> None:
    client = web.connect()
    ack = client.call("get_conversation", {"conversation_id": "x" * 100_000})
    assert ack["ok"] is False and len(json.dumps(ack)) < 600
    answer = web.http().get("/api/conversations/" + "y" * 100_000, headers=AUTH)
    assert answer.status_code == 404 and len(answer.data) < 600


@pytest.mark.parametrize(
    ("method", "path"), [("get", "/api/nothing-here"), ("post", "/api/status")]
)
def test_unknown_api_paths_answer_json(web: Web, method: str, path: str) -> None:
    answer = getattr(web.http(), method)(path, headers=AUTH)
    assert answer.status_code in (404, 405)
    assert answer.is_json and answer.get_json()["ok"] is False


def test_every_answer_carries_a_strict_content_security_policy(web: Web) -> None:
    for path in ("/", "/debug", "/api/status"):
        policy = web.http().get(path, headers=AUTH).headers["Content-Security-Policy"]
        assert "script-src 'self'" in policy and "img-src 'self' data:" in policy
        assert "connect-src 'self'" in policy and "unsafe-inline" not in policy


def test_the_page_admits_only_its_own_fresh_style_nonce(web: Web) -> None:
    """The terminal's <style> elements (xterm writes them) carry a nonce the page's policy
    names: another for every page, and held by the terminal's stylesheet link only."""
    nonces = []
    for _ in range(2):
        page = web.http().get("/", headers=AUTH)
        found = re.search(
            r"style-src 'self' 'nonce-([\w-]{24})'(;|$)", page.headers["Content-Security-Policy"]
        )
        assert found, page.headers["Content-Security-Policy"]
        nonces.append(found[1])
        assert page.get_data(as_text=True).count(f'nonce="{found[1]}"') == 1
    assert nonces[0] != nonces[1]
    assert "nonce" not in web.http().get("/debug", headers=AUTH).headers["Content-Security-Policy"]


def test_a_weak_fixed_token_is_refused(tmp_path: Path, fake_llm: FakeLLM) -> None:
    """The right token is never throttled, so a short fixed one could be guessed."""
    env = agent_env(fake_llm.base_url, fake_llm.api_key, AGENT_WEB_TOKEN="short")
    argv = agent_argv("web", tmp_path / "ws", tmp_path / "data", "--port", str(free_port()))
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "at least 16 characters, this one has 5" in done.stderr
    assert "http://" not in done.stdout
