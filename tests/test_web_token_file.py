"""The web token is kept in DATA_DIR/web_token across restarts (web/token_file.py): made once,
private, reused; a stored one that is no token is replaced with a note, one that cannot be read
stops the start with a clear line; AGENT_WEB_TOKEN still wins. `/debug?token=` opens the debug
page as `/?token=` does the main one, and a refused page or socket says what to do."""

from __future__ import annotations

import stat
import subprocess
from pathlib import Path
from typing import Any

import requests
import socketio

from tests.fake_llm import FakeLLM
from tests.kit.server import URL_LINE, ServerProcess, agent_argv, agent_env
from tests.kit.settings import TOKEN
from tests.kit.waits import SLOWNESS


def token_server(tmp_path: Path, fake: FakeLLM) -> ServerProcess:
    """A server with no AGENT_WEB_TOKEN: it keeps its own."""
    workspace, data = tmp_path / "ws", tmp_path / "data"
    workspace.mkdir(exist_ok=True)
    server = ServerProcess(workspace, data, base_url=fake.base_url, api_key=fake.api_key)
    del server.env["AGENT_WEB_TOKEN"]
    return server


def printed_token(server: ServerProcess) -> str:
    found = [m["token"] for line in server.lines if (m := URL_LINE.search(line))]
    assert len(found) == 1, server.lines
    return found[0]


def page_status(server: ServerProcess, token: str) -> int:
    return requests.get(f"{server.url}/api/status", timeout=10, headers=bearer(token)).status_code


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_the_token_is_made_once_private_and_kept_across_restarts(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    server = token_server(tmp_path, fake_llm)
    with server:
        first = printed_token(server)
        kept = server.data_dir / "web_token"
        assert kept.read_text().strip() == first and len(first) >= 32
        assert stat.S_IMODE(kept.stat().st_mode) == 0o600
        assert page_status(server, first) == 200
        server.restart()
        assert printed_token(server) == first
        assert page_status(server, first) == 200
        assert not any(line.startswith("note:") and "web_token" in line for line in server.lines)


def test_a_stored_token_that_is_no_token_is_replaced_with_a_note(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    kept = tmp_path / "data" / "web_token"
    kept.parent.mkdir(parents=True)
    kept.write_text("short\n")
    kept.chmod(0o644)
    with token_server(tmp_path, fake_llm) as server:
        token = printed_token(server)
        assert token != "short" and kept.read_text().strip() == token
        assert stat.S_IMODE(kept.stat().st_mode) == 0o600
        notes = [line for line in server.lines if line.startswith("note:")]
        assert any("did not hold a usable token" in line for line in notes), server.lines
        assert page_status(server, token) == 200


def test_a_token_file_readable_by_others_is_made_private_and_said(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    kept = tmp_path / "data" / "web_token"
    kept.parent.mkdir(parents=True)
    kept.write_text("A" * 40 + "\n")
    kept.chmod(0o644)
    with token_server(tmp_path, fake_llm) as server:
        assert printed_token(server) == "A" * 40
        assert stat.S_IMODE(kept.stat().st_mode) == 0o600
        assert any("was readable by other users" in line for line in server.lines), server.lines


def test_a_token_file_that_cannot_be_read_stops_the_start_clearly(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    (tmp_path / "ws").mkdir()
    (tmp_path / "data" / "web_token").mkdir(parents=True)  # a folder where the file goes
    env = agent_env(fake_llm.base_url, fake_llm.api_key)
    del env["AGENT_WEB_TOKEN"]
    done = subprocess.run(
        agent_argv("web", tmp_path / "ws", tmp_path / "data", "--port", "0"),
        env=env,
        capture_output=True,
        text=True,
        timeout=60 * SLOWNESS,
    )
    assert done.returncode == 2
    assert "http://" not in done.stdout
    assert "web token file" in done.stderr and "remove it to get a new token" in done.stderr
    assert "Traceback" not in done.stderr


def test_agent_web_token_wins_and_no_file_is_written(server: ServerProcess) -> None:
    assert printed_token(server) == TOKEN
    assert not (server.data_dir / "web_token").exists()


def test_pages_take_the_token_in_the_address_and_say_what_to_open_without_it(
    server: ServerProcess,
) -> None:
    for page in ("/", "/debug"):
        browser = requests.Session()
        opened = browser.get(f"{server.url}{page}?token={TOKEN}", timeout=10)
        assert opened.status_code == 200, page
        assert opened.url == f"{server.url}{page}"  # the token left the address bar
        assert browser.cookies.get("agent_token") == TOKEN
    bare = requests.get(f"{server.url}/", timeout=10)
    assert bare.status_code == 401
    assert "make run" in bare.text and "python main.py web" in bare.text
    assert "web_token" in bare.text
    stale = requests.get(f"{server.url}/debug", cookies={"agent_token": "old" * 8}, timeout=10)
    assert stale.status_code == 401
    assert "restarted with another one" in stale.text and "make run" in stale.text


def test_a_socket_with_a_wrong_token_is_told_why(server: ServerProcess) -> None:
    client = socketio.Client(reconnection=False)
    refusals: list[Any] = []
    client.on("connect_error", refusals.append)
    try:
        client.connect(server.url, auth={"token": "wrong" * 5}, wait_timeout=10 * SLOWNESS)
    except socketio.exceptions.ConnectionError:
        pass
    finally:
        client.disconnect()
    assert refusals == [{"message": "wrong token", "data": {"code": "wrong_token"}}]
