"""The web server in-process: every Socket.IO event and its ack (threading mode), and HTTP."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from werkzeug.test import TestResponse

from modules.workspace.file_watcher import MAX_BATCH, WorkspaceWatcher
from tests.fake_llm import Call, FakeLLM, Reply
from tests.kit import Received, payloads, wait_until
from tests.web_helpers import TOKEN, Web
from web.routes import LOG_CHUNK_BYTES, PREVIEW_LIMIT_BYTES


def bearer(token: str = TOKEN) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


# --- connect ---------------------------------------------------------------------------


@pytest.mark.parametrize("token", [None, "", "wrong", "é-not-ascii", TOKEN + "x"])
def test_connect_without_the_right_token_is_refused(web: Web, token: str | None):
    assert not web.connect(token).client.is_connected()


def test_connect_with_the_token_is_accepted(web: Web):
    assert web.connect().client.is_connected()


# --- send_message ----------------------------------------------------------------------


def test_send_message_streams_one_token_event_per_delta(web: Web, fake_llm: FakeLLM):
    text = "Hello there, streaming world!"
    fake_llm.script(Reply(content=text, chunk_size=3))
    client = web.connect()
    ack = client.call("send_message", {"conversation_id": None, "text": "hi"})
    assert ack["ok"] and ack["conversation_id"] and ack["message_id"]
    events = client.wait_done(ack["conversation_id"])
    assert [e.payload["seq"] for e in events] == list(range(1, len(events) + 1))
    tokens = [e.payload for e in events if e.name == "token"]
    assert len(tokens) == len(range(0, len(text), 3))
    assert "".join(t["text"] for t in tokens) == text
    assert events[-1].name == "done" and events[-1].payload["reason"] == "complete"
    assert {"prompt_tokens", "completion_tokens"} <= set(events[-1].payload["usage"])
    status = [e.payload for e in events if e.name == "status"]
    assert status[0]["state"] == "thinking" and status[-1]["state"] == "idle"
    assert {"used_tokens", "limit_tokens"} <= set(status[0]["context"])


def test_a_second_task_continues_the_seq_and_the_history(web: Web, fake_llm: FakeLLM):
    fake_llm.script(Reply(content="first"), Reply(content="second"))
    client = web.connect()
    cid = client.send("one")
    first = client.wait_done(cid)
    assert client.send("two", cid) == cid
    second = client.wait_done(cid)
    assert second[0].payload["seq"] == first[-1].payload["seq"] + 1
    assert fake_llm.chat_requests[-1].last_user_text == "two"
    assert [m["content"] for m in fake_llm.chat_requests[-1].messages[1:]] == [
        "one",
        "first",
        "two",
    ]


BAD_PAYLOADS: list[Any] = [
    {},
    {"text": ""},
    {"text": 5},
    {"text": "x", "mode": "slow"},
    {"text": "x", "approval": "yes"},
    {"text": "x", "conversation_id": 7},
    "just a string",
    ["a", "list"],
    42,
    {"text": "x" * 200_001},
]


@pytest.mark.parametrize("payload", BAD_PAYLOADS)
def test_send_message_bad_payloads_fail_cleanly(web: Web, payload: Any):
    client = web.connect()
    ack = client.call("send_message", payload)
    assert ack["ok"] is False and ack["error"]["code"] == "bad_request"
    assert isinstance(ack["error"]["message"], str) and ack["error"]["message"]
    assert client.call("get_status", {})["ok"] is True
    assert not web.state.hub.running()


@pytest.mark.parametrize(
    "event, payload",
    [
        ("cancel", {}),
        ("cancel", {"conversation_id": ["x"]}),
        ("approve", {"conversation_id": "c", "approved": True}),
        ("approve", {"conversation_id": "c", "call_id": "k", "approved": "maybe"}),
        ("join", {"after_seq": 3}),
        ("join", {"conversation_id": "c", "after_seq": "soon"}),
        ("get_conversation", {"conversation_id": None}),
        ("get_conversation", "c"),
        ("list_conversations", ["not", "an", "object"]),
        ("get_file_tree", 3),
    ],
)
def test_every_event_rejects_bad_payloads(web: Web, event: str, payload: Any):
    client = web.connect()
    ack = client.call(event, payload)
    assert ack["ok"] is False and ack["error"]["code"] == "bad_request", ack
    assert client.call("list_conversations", {})["ok"] is True


def test_extra_arguments_and_missing_payloads(web: Web):
    client = web.connect()
    two = client.client.emit("get_status", {}, {}, callback=True)
    assert two["ok"] is False and two["error"]["code"] == "bad_request"
    assert client.client.emit("get_status", callback=True)["ok"] is True
    assert client.client.emit("list_conversations", None, callback=True)["ok"] is True


def test_busy_second_send_message_then_cancel(web: Web, fake_llm: FakeLLM):
    fake_llm.script(Reply(content="x" * 400, chunk_size=1, delay=0.02))
    client = web.connect()
    cid = client.send("slow please", approval="ask")
    client.wait_for("token")
    busy = client.call(
        "send_message", {"conversation_id": cid, "text": "again", "approval": "auto"}
    )
    assert busy["ok"] is False and busy["error"]["code"] == "busy"
    assert web.state.hub.get(cid).approval == "ask"
    started = time.monotonic()
    assert client.call("cancel", {"conversation_id": cid}) == {"ok": True}
    events = client.wait_done(cid)
    assert time.monotonic() - started < 2
    assert events[-1].payload["reason"] == "cancelled"
    again = client.call("cancel", {"conversation_id": cid})
    assert again["ok"] is False and again["error"]["code"] == "not_running"


@pytest.mark.parametrize(
    "event, payload",
    [
        ("send_message", {"conversation_id": "0123456789abcdef", "text": "hi"}),
        ("send_message", {"conversation_id": "../../etc", "text": "hi"}),
        ("cancel", {"conversation_id": "nope"}),
        ("approve", {"conversation_id": "nope", "call_id": "c1", "approved": True}),
        ("join", {"conversation_id": "nope"}),
        ("get_conversation", {"conversation_id": "nope"}),
    ],
)
def test_unknown_conversation_is_not_found(web: Web, event: str, payload: dict[str, Any]):
    client = web.connect()
    ack = client.call(event, payload)
    assert ack["ok"] is False and ack["error"]["code"] == "not_found", ack
    assert client.call("list_conversations", {}) == {"ok": True, "conversations": [], "running": []}


def test_not_configured_model_is_reported(make_web: Callable[..., Web]):
    web = make_web(api_key=None, base_url="http://127.0.0.1:9/v1", deepseek_api_key=None)
    ack = web.connect().call("send_message", {"conversation_id": None, "text": "hi"})
    assert ack["ok"] is False and ack["error"]["code"] == "not_configured"
    assert "API key" in ack["error"]["message"]


def test_branch_hangs_under_the_given_parent(web: Web, fake_llm: FakeLLM):
    fake_llm.script(Reply(content="a1"), Reply(content="b1"), Reply(content="b1 again"))
    client = web.connect()
    cid = client.send("q1")
    client.wait_done(cid)
    client.send("q2", cid)
    client.wait_done(cid)
    first_answer = client.call("get_conversation", {"conversation_id": cid})["messages"][1]
    client.clear()
    branch = client.call(
        "send_message",
        {"conversation_id": cid, "text": "q2 edited", "parent_id": first_answer["id"]},
    )
    assert branch["ok"], branch
    client.wait_done(cid)
    messages = client.call("get_conversation", {"conversation_id": cid})["messages"]
    edited = next(m for m in messages if m["id"] == branch["message_id"])
    assert edited["parent_id"] == first_answer["id"] and edited["version"] == 2
    sent = [m["content"] for m in fake_llm.chat_requests[-1].messages[1:]]
    assert sent == ["q1", "a1", "q2 edited"]
    bad = client.call(
        "send_message", {"conversation_id": cid, "text": "x", "parent_id": "no-such-message"}
    )
    assert bad["ok"] is False and bad["error"]["code"] == "not_found"


def test_explicit_null_parent_starts_a_new_root(web: Web, fake_llm: FakeLLM):
    fake_llm.script(Reply(content="a1"), Reply(content="a1 again"))
    client = web.connect()
    first = client.call("send_message", {"conversation_id": None, "text": "q1"})
    cid = first["conversation_id"]
    client.wait_done(cid)
    client.clear()
    edited = client.call(
        "send_message", {"conversation_id": cid, "text": "q1 edited", "parent_id": None}
    )
    assert edited["ok"], edited
    client.wait_done(cid)
    messages = client.call("get_conversation", {"conversation_id": cid})["messages"]
    record = next(m for m in messages if m["id"] == edited["message_id"])
    assert record["parent_id"] is None and record["version"] == 2
    assert [m["content"] for m in fake_llm.chat_requests[-1].messages[1:]] == ["q1 edited"]


# --- approval --------------------------------------------------------------------------


def _approval_run(web: Web, fake_llm: FakeLLM, approved: bool) -> list[Received]:
    fake_llm.script(
        Reply(tool_calls=[Call("run_command", {"command": "echo hi > out.txt"})]),
        Reply(content="finished"),
    )
    client = web.connect()
    cid = client.send("make out.txt")
    asked = client.wait_for("tool", phase="approval")
    assert asked["name"] == "run_command" and "echo hi" in asked["preview"]
    # (The declined run shows after `done` that nothing runs without an answer.)
    assert not (web.workspace / "out.txt").exists()
    wrong = client.call("approve", {"conversation_id": cid, "call_id": "other", "approved": True})
    assert wrong["ok"] is False and wrong["error"]["code"] == "not_waiting"
    ack = client.call(
        "approve", {"conversation_id": cid, "call_id": asked["call_id"], "approved": approved}
    )
    assert ack == {"ok": True, "always_allowed": []}
    return client.wait_done(cid)


def test_ask_mode_approved_command_runs(make_web: Callable[..., Web], fake_llm: FakeLLM):
    web = make_web(approval="ask")
    events = _approval_run(web, fake_llm, approved=True)
    [result] = payloads(events, "tool", phase="result")
    assert result["ok"] is True
    assert (web.workspace / "out.txt").read_text() == "hi\n"
    assert events[-1].payload["reason"] == "complete"


def test_ask_mode_rejected_command_is_declined(make_web: Callable[..., Web], fake_llm: FakeLLM):
    web = make_web(approval="ask")
    events = _approval_run(web, fake_llm, approved=False)
    [result] = payloads(events, "tool", phase="result")
    assert result["ok"] is False and "declined" in result["output"]
    assert not (web.workspace / "out.txt").exists()
    assert events[-1].payload["reason"] == "complete"


def test_approve_bad_payload(web: Web):
    ack = web.connect().call("approve", {"conversation_id": "x", "call_id": "c"})
    assert ack["ok"] is False and ack["error"]["code"] == "bad_request"


# --- join ------------------------------------------------------------------------------


def test_join_replays_the_last_task_after_seq(web: Web, fake_llm: FakeLLM):
    fake_llm.script(Reply(content="abcdefghij", chunk_size=2))
    sender = web.connect()
    cid = sender.send("go")
    original = sender.wait_done(cid)
    other = web.connect()
    ack = other.call("join", {"conversation_id": cid, "after_seq": 3})
    assert ack["ok"] is True
    replayed = [(e.name, e.payload) for e in other.of(cid)]
    assert replayed == [(e.name, e.payload) for e in original if e.payload["seq"] > 3]
    everything = web.connect()
    everything.call("join", {"conversation_id": cid})
    assert len(everything.received()) == len(original)


def test_join_while_running_gets_the_rest_live_without_gap_or_duplicate(
    web: Web, fake_llm: FakeLLM
):
    fake_llm.script(Reply(content="y" * 120, chunk_size=1, delay=0.005))
    sender = web.connect()
    cid = sender.send("go")
    sender.wait_until(
        lambda events: any(e.name == "token" and e.payload["seq"] >= 10 for e in events),
        what="token #10",
    )
    late = web.connect()
    assert late.call("join", {"conversation_id": cid, "after_seq": 5})["ok"]
    seen = late.wait_done(cid)
    last = sender.wait_done(cid)[-1].payload["seq"]
    assert [e.payload["seq"] for e in seen] == list(range(6, last + 1))


# --- reading calls ---------------------------------------------------------------------


def test_list_and_get_conversation(web: Web, fake_llm: FakeLLM):
    fake_llm.script(Reply(content="the answer"))
    client = web.connect()
    cid = client.send("Question about things")
    client.wait_done(cid)
    listed = client.call("list_conversations", {})
    assert listed["ok"] is True
    assert [c["id"] for c in listed["conversations"]] == [cid]
    assert set(listed["conversations"][0]) == {"id", "title", "created_at", "updated_at"}
    got = client.call("get_conversation", {"conversation_id": cid})
    assert got["ok"] and got["conversation"]["id"] == cid
    assert [(m["role"], m["content"]) for m in got["messages"]] == [
        ("user", "Question about things"),
        ("assistant", "the answer"),
    ]
    assert all(not k.startswith("_") for m in got["messages"] for k in m)


def test_get_file_tree_and_status(web: Web):
    (web.workspace / "src").mkdir()
    (web.workspace / "src" / "app.py").write_text("print(1)\n")
    (web.workspace / "README.md").write_text("# hi\n")
    client = web.connect()
    ack = client.call("get_file_tree", {})
    assert ack["ok"] and ack["tree"]["path"] == "" and ack["tree"]["is_dir"]
    top = {c["path"]: c for c in ack["tree"]["children"]}
    assert set(top) == {"src", "README.md"}
    assert top["src"]["children"][0]["path"] == "src/app.py"
    status = client.call("get_status", {})
    assert status["ok"] and status["provider"] == "deepseek" and status["model"]
    assert status["mode"] == "fast" and status["approval"] == "auto"
    assert status["async_mode"] == "threading"
    assert status["sandbox"]["kind"] in {"docker", "bubblewrap", "local"}
    assert isinstance(status["sandbox"]["isolation"], list)
    assert TOKEN not in json.dumps(status)


# --- HTTP ------------------------------------------------------------------------------


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


# --- the workspace watcher -------------------------------------------------------------


class WatcherRun:
    """A WorkspaceWatcher on a temporary folder, its batches collected."""

    def __init__(self, root: Path, ignore: list[Path]) -> None:
        self.batches: list[list[dict[str, Any]]] = []
        self.reader: threading.Thread | None = None
        self.watcher = WorkspaceWatcher(
            root, ignore=ignore, on_changes=self.batches.append, start_background_task=self._start
        )
        self.watcher.start()
        assert self.watcher.ready.wait(10), "the watcher child never became ready"

    def _start(self, target: Callable[[], None]) -> None:
        self.reader = threading.Thread(target=target, daemon=True)
        self.reader.start()

    def changes(self) -> list[dict[str, Any]]:
        return [change for batch in self.batches for change in batch]

    def wait_for(self, path: str, timeout: float = 3) -> dict[str, Any]:
        """The last change reported for `path` (as the source or the destination of a move)."""

        def last() -> dict[str, Any] | None:
            found = [c for c in self.changes() if path in (c["path"], c.get("dest_path"))]
            return found[-1] if found else None

        return wait_until(
            last, timeout, f"a change for {path}", details=lambda: f"got {self.changes()}"
        )


def test_watcher_reports_changes_and_skips_noise(tmp_path: Path):
    root, data = tmp_path / "ws", tmp_path / "ws" / "data"
    data.mkdir(parents=True)
    run = WatcherRun(root, [data])
    try:
        (root / ".git").mkdir()
        (root / ".git" / "index").write_text("x")
        (data / "log.jsonl").write_text("x")
        (root / "notes.txt.swp").write_text("x")
        (root / "sub").mkdir()
        (root / "sub" / "a.txt").write_text("a")
        assert run.wait_for("sub/a.txt")["is_dir"] is False
        (root / "sub" / "a.txt").rename(root / "sub" / "b.txt")
        moved = run.wait_for("sub/b.txt")  # the move came after the noise, so did its change
        assert moved["event"] == "moved" and moved["path"] == "sub/a.txt"
        paths = {c["path"] for c in run.changes()}
        assert not any(p.startswith((".git", "data")) or p.endswith(".swp") for p in paths)
        assert {"event": "created", "path": "sub", "is_dir": True} in run.changes()
    finally:
        run.watcher.stop()


def test_watcher_batches_keep_the_last_order_and_stay_bounded(tmp_path: Path):
    root = tmp_path / "ws"
    root.mkdir()
    run = WatcherRun(root, [])
    try:
        flapping = root / "flap.txt"
        flapping.write_text("1")
        flapping.unlink()
        flapping.write_text("2")
        for n in range(MAX_BATCH + 500):
            (root / f"f{n:05d}").write_bytes(b"")
        run.wait_for(f"f{MAX_BATCH + 499:05d}")
        flap = [c["event"] for c in run.changes() if c["path"] == "flap.txt"]
        assert flap[-1] in ("created", "modified"), flap
        assert max(len(batch) for batch in run.batches) <= MAX_BATCH
    finally:
        run.watcher.stop()
    assert run.reader is not None
    run.reader.join(5)
    assert not run.reader.is_alive(), "the watcher still reads after stop"
    seen = len(run.batches)
    (root / "after-stop.txt").write_text("x")
    assert len(run.batches) == seen
