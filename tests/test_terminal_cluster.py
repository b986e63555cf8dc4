"""Scale-out: a person's terminal runs in the conversation's sandbox session, in the server
process that holds its session lease, whichever process the person's page is connected to: the
terminal ops sent to another process are applied there and its output comes back through the
message queue (two `main.py web` processes, one data dir, a real redis-server; the local
sandbox under bubblewrap). Skipped, with the reason, where redis-server is not installed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fake_llm import FakeLLM
from tests.kit.clients import connected
from tests.kit.cluster import (
    ClusterServer,
    RedisServer,
    missing_programs,
    process_owner_pid,
    session_cluster,
    session_op,
)
from tests.kit.model import run_calls
from tests.kit.terminal_ops import open_terminal, screen, shows, type_in
from tests.kit.waits import wait_until

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(missing_programs() is not None, reason=str(missing_programs())),
]
WAIT = 60
MARK = "echo from-the-session-of-a > /tmp/mark; exec sleep 300"  # /tmp: the session's own


@pytest.fixture
def servers(tmp_path: Path, fake_llm: FakeLLM, redis: RedisServer) -> Iterator[list[ClusterServer]]:
    with session_cluster(tmp_path, redis.url(4), fake_llm) as pair:
        yield pair


def test_a_terminal_opened_through_another_process_runs_where_the_session_lives(
    servers: list[ClusterServer],
) -> None:
    a, b = servers
    with connected(a.url) as on_a, connected(b.url) as on_b:
        started, cid = run_calls(on_a, [("run_command", {"command": MARK, "background": True})])
        assert "running in the background as p1" in started[0]["output"], started

        tid = open_terminal(on_b, cid)  # B's client; the session is A's
        assert process_owner_pid(servers[0], cid, tid) == a.pid
        type_in(on_b, cid, tid, "cat /tmp/mark\n")
        shows(on_b, cid, tid, "from-the-session-of-a")  # A's output reaches B's client
        assert session_op(on_b, "terminal_resize", cid, terminal_id=tid, rows=30, cols=100)["ok"]
        type_in(on_b, cid, tid, "stty size\n")
        shows(on_b, cid, tid, "30 100")
        listed = session_op(on_b, "list_terminals", cid)["terminals"]
        assert [(t["terminal_id"], t["rows"]) for t in listed] == [(tid, 30)], listed

        attached = session_op(on_a, "terminal_attach", cid, terminal_id=tid)  # the same terminal
        assert "from-the-session-of-a" in attached["data"], attached
        type_in(on_a, cid, tid, "echo both-$((6*7))\n")
        for client in (on_a, on_b):
            shows(client, cid, tid, "both-42")
        assert [p["id"] for p in session_op(on_a, "list_processes", cid)["processes"]] == [
            "p1",
            tid,
        ]

        assert session_op(on_b, "terminal_close", cid, terminal_id=tid)["ok"]
        on_b.wait_for("terminal", WAIT, conversation_id=cid, terminal_id=tid, ended=True)
        assert session_op(on_a, "list_terminals", cid)["terminals"] == []
        gone = on_b.call("terminal_input", {"conversation_id": cid, "terminal_id": tid,
                                            "data": "x"}, timeout=WAIT)  # fmt: skip
        assert not gone["ok"] and gone["error"]["code"] == "not_found", gone


def test_a_terminal_opened_first_makes_its_process_the_sessions_holder(
    servers: list[ClusterServer],
) -> None:
    a, b = servers
    with connected(a.url) as on_a, connected(b.url) as on_b:
        cid = run_calls(on_a, [("run_command", {"command": "true"})])[1]
        tid = open_terminal(on_b, cid)  # no session lived anywhere: it is B's now
        assert process_owner_pid(servers[0], cid, tid) == b.pid
        type_in(on_b, cid, tid, "echo opened-$((2*4))\n")
        shows(on_b, cid, tid, "opened-8")
        listed = session_op(on_a, "list_processes", cid)["processes"]  # relayed to B: it is there
        assert [(p["id"], p["terminal"], p["running"]) for p in listed] == [(tid, True, True)]
        type_in(on_a, cid, tid, "echo typed-on-a\n")  # A's client, never attached: still B's
        shows(on_b, cid, tid, "typed-on-a")
        assert "typed-on-a" not in screen(on_a, cid, tid)
        assert session_op(on_a, "terminal_close", cid, terminal_id=tid)["ok"]
        wait_until(lambda: session_op(on_b, "list_terminals", cid)["terminals"] == [], WAIT,
                   "the terminal closed")  # fmt: skip
