"""Scale-out: a conversation's background processes live in the server process that holds its
sandbox session, and the process ops sent to another are applied there (two `main.py web`
processes, one data dir, a real redis-server; the local sandbox under bubblewrap). Skipped,
with the reason, where redis-server is not installed."""

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

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(missing_programs() is not None, reason=str(missing_programs())),
]

WAIT = 60
TICKS = "while true; do echo tick; sleep 0.2; done"


@pytest.fixture
def servers(tmp_path: Path, fake_llm: FakeLLM, redis: RedisServer) -> Iterator[list[ClusterServer]]:
    with session_cluster(tmp_path, redis.url(3), fake_llm) as pair:
        yield pair


def test_process_ops_sent_to_another_server_are_applied_where_the_session_lives(
    servers: list[ClusterServer],
) -> None:
    a, b = servers
    with connected(a.url) as on_a, connected(b.url) as on_b:
        started, cid = run_calls(on_a, [("run_command", {"command": TICKS, "background": True})])
        assert "running in the background as p1" in started[0]["output"], started
        assert process_owner_pid(servers[0], cid, "p1") == a.pid
        assert session_op(on_b, "join", cid, after_seq=0)["ok"]

        listed = session_op(on_b, "list_processes", cid)["processes"]
        assert [(p["id"], p["running"]) for p in listed] == [("p1", True)]
        assert listed[0]["output_end"] > 0  # known only to the live session, on A
        read = session_op(on_b, "process_output", cid, process_id="p1", offset=0)
        assert read["text"].startswith("tick\n") and read["running"], read
        live = on_b.wait_for("process", WAIT, conversation_id=cid, process_id="p1", phase="output")
        assert "tick" in live["delta"]  # A's events reach B's clients

        stopped = session_op(on_b, "stop_process", cid, process_id="p1")["process"]
        assert (stopped["running"], stopped["end_reason"]) == (False, "stopped"), stopped
        for client in (on_a, on_b):
            exited = client.wait_for("process", WAIT, conversation_id=cid, phase="exited")
            assert (exited["process_id"], exited["reason"]) == ("p1", "stopped"), exited

        again = session_op(on_b, "restart_process", cid, process_id="p1")["process"]
        assert (again["id"], again["origin"], again["running"]) == ("p2", "user", True), again
        assert process_owner_pid(servers[0], cid, "p2") == a.pid  # in A's session, where p1 ran
        session_op(on_b, "stop_process", cid, process_id="p2")
        listed = session_op(on_a, "list_processes", cid)["processes"]
        assert [(p["id"], p["end_reason"]) for p in listed] == [
            ("p1", "stopped"),
            ("p2", "stopped"),
        ]
