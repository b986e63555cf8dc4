"""The web server's HTTP routes in-process: the token and its cookie, conversations, files, logs."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from werkzeug.test import TestResponse

from tests.fake_llm import FakeLLM, Reply
from tests.kit.clients import Web
from tests.kit.settings import TOKEN
from web.routes import LOG_CHUNK_BYTES, PREVIEW_LIMIT_BYTES


def bearer(token: str = TOKEN) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


API_ROUTES = [
    "/api/conversations",
    "/api/tree",
    "/api/status",
    "/api/logs/agent",
    "/api/file?path=a.txt",
    "/api/conversations/nope",
]


def json_of(response: TestResponse) -> Any:
    """The JSON a route answered with (werkzeug gives None for an answer that is not JSON)."""
    assert response.json is not None, response.data
    return response.json


@pytest.mark.parametrize("path", API_ROUTES)
def test_api_routes_need_the_token(web: Web, path: str):
    (web.workspace / "a.txt").write_text("a")
    http = web.http()
    for headers in ({}, bearer("wrong"), {"Authorization": TOKEN}, bearer("ünïcode")):
        refused = http.get(path, headers=headers)
        assert refused.status_code == 401 and json_of(refused)["error"]["code"] == "unauthorized"
    assert http.get(path, headers=bearer()).status_code in (200, 404)


def test_pages_need_the_token(web: Web):
    http = web.http()
    assert http.get("/").status_code == 401
    assert http.get("/debug").status_code == 401
    assert http.get("/?token=wrong").status_code == 401
    assert "Set-Cookie" not in http.get("/?token=wrong").headers


def test_cookie_flow_from_the_token_url(web: Web):
    http = web.http()
    first = http.get(f"/?token={TOKEN}")
    assert first.status_code in (302, 303) and first.headers["Location"].endswith("/")
    cookie = first.headers["Set-Cookie"]
    assert "agent_token=" in cookie and "HttpOnly" in cookie and "SameSite=Strict" in cookie
    assert http.get("/api/status").status_code == 200
    assert json_of(http.get("/api/status"))["ok"] is True
    stranger = web.http()
    assert stranger.get("/api/status").status_code == 401


def test_security_headers(web: Web):
    response = web.http().get("/api/status", headers=bearer())
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    assert response.headers["X-Frame-Options"] == "DENY"
    assert response.headers["Referrer-Policy"] == "no-referrer"
    assert response.headers["Cache-Control"] == "no-store"


def test_conversation_routes(web: Web, fake_llm: FakeLLM):
    fake_llm.script(Reply(content="ok"))
    client = web.connect()
    cid = client.send("hello")
    client.wait_done(cid)
    http = web.http()
    listed = json_of(http.get("/api/conversations", headers=bearer()))
    assert [c["id"] for c in listed["conversations"]] == [cid]
    one = json_of(http.get(f"/api/conversations/{cid}", headers=bearer()))
    assert one["conversation"]["id"] == cid and len(one["messages"]) == 2
    missing = http.get("/api/conversations/nope", headers=bearer())
    assert missing.status_code == 404 and json_of(missing)["error"]["code"] == "not_found"
    tree = json_of(http.get("/api/tree", headers=bearer()))
    assert tree["ok"] and tree["tree"]["is_dir"]


def _file(web: Web, path: str) -> Any:
    return web.http().get("/api/file", query_string={"path": path}, headers=bearer())


def test_file_preview(web: Web):
    (web.workspace / "notes").mkdir()
    (web.workspace / "notes" / "a.md").write_text("héllo\n", encoding="utf-8")
    ok = _file(web, "notes/a.md")
    assert ok.status_code == 200
    assert ok.json == {
        "ok": True,
        "path": "notes/a.md",
        "content": "héllo\n",
        "truncated": False,
        "binary": False,
        "size": 7,
    }
    (web.workspace / "blob.bin").write_bytes(b"\x89PNG\x00\x01\x02" * 10)
    binary = _file(web, "blob.bin").json
    assert binary["binary"] is True and binary["content"] == ""
    (web.workspace / "big.txt").write_text("z" * (PREVIEW_LIMIT_BYTES + 100))
    big = _file(web, "big.txt").json
    assert big["truncated"] is True and len(big["content"]) == PREVIEW_LIMIT_BYTES
    assert big["size"] == PREVIEW_LIMIT_BYTES + 100
    assert _file(web, "missing.txt").status_code == 404
    assert _file(web, "notes").status_code == 404


def test_file_preview_is_confined_to_the_workspace(web: Web, tmp_path: Path):
    secret = tmp_path / "secret.txt"
    secret.write_text("top secret")
    (web.workspace / "link.txt").symlink_to(secret)
    (web.workspace / "linkdir").symlink_to(tmp_path)
    for path in [
        "../secret.txt",
        str(secret),
        "/etc/passwd",
        "link.txt",
        "linkdir/secret.txt",
        "",
        "~/x",
        "a\\..\\..\\secret.txt",
    ]:
        response = _file(web, path)
        assert response.status_code == 400, path
        assert response.json["error"]["code"] == "bad_path"
        assert "top secret" not in response.get_data(as_text=True)


def _logs(web: Web, name: str, **query: Any) -> Any:
    return web.http().get(f"/api/logs/{name}", query_string=query, headers=bearer())


def test_logs_offsets_and_conversation_filter(web: Web):
    path = web.data_dir / "logs" / "debug_stream.log"
    start = path.stat().st_size
    with path.open("a") as handle:
        for i, cid in enumerate(["c1", "c2", "c1"]):
            handle.write(json.dumps({"conversation_id": cid, "raw": f"delta {i}"}) + "\n")
        handle.write('{"conversation_id": "c1", "raw": "half a li')
    page = _logs(web, "debug_stream", after=start).json
    assert [json.loads(line)["raw"] for line in page["lines"]] == ["delta 0", "delta 1", "delta 2"]
    assert _logs(web, "debug_stream", after=page["next"]).json["lines"] == []
    with path.open("a") as handle:
        handle.write('ne"}\n')
    rest = _logs(web, "debug_stream", after=page["next"]).json
    assert [json.loads(line)["raw"] for line in rest["lines"]] == ["half a line"]
    assert rest["next"] == path.stat().st_size
    only = _logs(web, "debug_stream", after=start, conversation_id="c1").json
    assert [json.loads(line)["raw"] for line in only["lines"]] == [
        "delta 0",
        "delta 2",
        "half a line",
    ]
    assert only["next"] == path.stat().st_size
    tail = _logs(web, "debug_stream").json
    assert tail["next"] == path.stat().st_size and len(tail["lines"]) >= 4
    assert _logs(web, "debug_stream", after=10**9).json == {
        "ok": True,
        "lines": [],
        "next": path.stat().st_size,
    }


def test_logs_bad_requests_and_oversized_lines(web: Web):
    assert _logs(web, "passwd").status_code == 404
    assert _logs(web, "../agent").status_code == 404
    assert _logs(web, "agent", after="abc").status_code == 400
    path = web.data_dir / "logs" / "debug_stream.log"
    start = path.stat().st_size
    with path.open("a") as handle:
        handle.write("x" * (LOG_CHUNK_BYTES * 2 + 10) + "\n" + '{"raw": "after"}\n')
    first = _logs(web, "debug_stream", after=start).json
    assert len(first["lines"]) == 1 and "cut]" in first["lines"][0]
    second = _logs(web, "debug_stream", after=first["next"]).json
    assert second["lines"] == ['{"raw": "after"}']


def test_agent_log_has_the_task(web: Web, fake_llm: FakeLLM):
    fake_llm.script(Reply(content="logged"))
    client = web.connect()
    cid = client.send("log me")
    client.wait_done(cid)
    lines = _logs(web, "agent", after=0, conversation_id=cid).json["lines"]
    messages = [json.loads(line)["message"] for line in lines]
    assert "task started" in messages and "task ended" in messages
    assert TOKEN not in "".join(lines)


def test_log_tail_starts_at_a_line_boundary(web: Web):
    path = web.data_dir / "logs" / "debug_stream.log"
    with path.open("a") as handle:
        for i in range(3000):
            handle.write(json.dumps({"conversation_id": "c", "raw": f"{i:040d}"}) + "\n")
    tail = _logs(web, "debug_stream").json
    assert all(json.loads(line)["raw"] for line in tail["lines"])
    assert json.loads(tail["lines"][-1])["raw"] == f"{2999:040d}"
    assert os.path.getsize(path) == tail["next"]
