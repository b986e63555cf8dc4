"""Scale-out: a conversation's background processes live in the server process that holds its
sandbox session, and the process ops sent to another are applied there (two `main.py web`
processes, one data dir, a real redis-server; the local sandbox under bubblewrap). Skipped,
with the reason, where redis-server is not installed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fake_llm import FakeLLM
from tests.kit.clients import EventClient, connected
from tests.kit.cluster import ClusterServer, RedisServer, cluster, missing_programs
from tests.kit.model import calls_in_the_message, run_calls

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(missing_programs() is not None, reason=str(missing_programs())),
]

WAIT = 60
TICKS = "while true; do echo tick; sleep 0.2; done"


@pytest.fixture
def servers(tmp_path: Path, fake_llm: FakeLLM, redis: RedisServer) -> Iterator[list[ClusterServer]]:
    fake_llm.responder = calls_in_the_message
    env = {"AGENT_SANDBOX": "local", "AGENT_PROCESS_SETTLE_SECONDS": "0.5"}
    url, key = fake_llm.base_url, fake_llm.api_key
    with cluster(tmp_path, redis.url(3), base_url=url, api_key=key, env=env) as pair:
        yield pair


def owner_pid(servers: list[ClusterServer], cid: str, process_id: str) -> int:
    """The pid of the server process that started the process (its index record's owner)."""
    index = servers[0].data_dir / "processes" / cid / "index.json"
    records = {r["id"]: r for r in json.loads(index.read_text())["processes"]}
    return int(records[process_id]["owner"].split(":")[1])


def op(client: EventClient, name: str, cid: str, **fields: Any) -> dict[str, Any]:
    ack = client.call(name, {"conversation_id": cid, **fields}, timeout=WAIT)
    assert ack["ok"], ack
    return dict(ack)


def test_process_ops_sent_to_another_server_are_applied_where_the_session_lives(
    servers: list[ClusterServer],
) -> None:
    a, b = servers
    with connected(a.url) as on_a, connected(b.url) as on_b:
        if on_a.call("get_status")["sandbox"]["kind"] != "bubblewrap":
            pytest.skip("bubblewrap is not usable here")
        started, cid = run_calls(on_a, [("run_command", {"command": TICKS, "background": True})])
        assert "running in the background as p1" in started[0]["output"], started
        assert owner_pid(servers, cid, "p1") == a.pid
        assert op(on_b, "join", cid, after_seq=0)["ok"]

        listed = op(on_b, "list_processes", cid)["processes"]
        assert [(p["id"], p["running"]) for p in listed] == [("p1", True)]
        assert listed[0]["output_end"] > 0  # known only to the live session, on A
        read = op(on_b, "process_output", cid, process_id="p1", offset=0)
        assert read["text"].startswith("tick\n") and read["running"], read
        live = on_b.wait_for("process", WAIT, conversation_id=cid, process_id="p1", phase="output")
        assert "tick" in live["delta"]  # A's events reach B's clients

        stopped = op(on_b, "stop_process", cid, process_id="p1")["process"]
        assert (stopped["running"], stopped["end_reason"]) == (False, "stopped"), stopped
        for client in (on_a, on_b):
            exited = client.wait_for("process", WAIT, conversation_id=cid, phase="exited")
            assert (exited["process_id"], exited["reason"]) == ("p1", "stopped"), exited

        again = op(on_b, "restart_process", cid, process_id="p1")["process"]
        assert (again["id"], again["origin"], again["running"]) == ("p2", "user", True), again
        assert owner_pid(servers, cid, "p2") == a.pid  # in A's session, where p1 ran
        op(on_b, "stop_process", cid, process_id="p2")
        listed = op(on_a, "list_processes", cid)["processes"]
        assert [(p["id"], p["end_reason"]) for p in listed] == [
            ("p1", "stopped"),
            ("p2", "stopped"),
        ]
