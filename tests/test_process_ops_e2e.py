"""The page's process ops and events on a process of the agent's, through the real server
(`main.py web`, the local sandbox under bubblewrap) and the fake model: a character written in
two pieces reaches the page whole, and a process the page restarts is the user's."""

from __future__ import annotations

import itertools

import pytest

from tests.kit.clients import EventClient
from tests.kit.model import run_calls
from tests.kit.server import ServerProcess
from tests.kit.waits import wait_until

SPLIT = """
import os, sys, time
sys.stdout.buffer.write(b"A\\xe2\\x82"); sys.stdout.flush()  # the euro sign's first two bytes
while not os.path.exists("go"):
    time.sleep(0.02)
sys.stdout.buffer.write(b"\\xac!"); sys.stdout.flush()
"""
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.server(
        env={"AGENT_SANDBOX": "local", "AGENT_PROCESS_SETTLE_SECONDS": "0.5"},
        files={"split.py": SPLIT},
    ),
]
WAIT = 60


def output_of(client: EventClient, cid: str, process_id: str, offset: int = 0) -> dict:
    ack = client.call(
        "process_output", {"conversation_id": cid, "process_id": process_id, "offset": offset}
    )
    assert ack["ok"], ack
    return dict(ack)


def test_a_character_written_in_two_pieces_reaches_the_page_whole(
    agent: EventClient, server: ServerProcess
) -> None:
    (go := server.workspace / "go").unlink(missing_ok=True)
    started, cid = run_calls(agent, [("run_command", {"command": "python3 split.py",
                                                      "background": True})])  # fmt: skip
    assert started[0]["ok"] and "running in the background as p1" in started[0]["output"]
    wait_until(lambda: output_of(agent, cid, "p1")["output_end"] == 3, WAIT, "its first piece")
    agent.wait_for("process", WAIT, conversation_id=cid, phase="output", delta="A")
    held = output_of(agent, cid, "p1")
    assert (held["text"], held["next_offset"]) == ("A", 1), held  # the cut euro sign waits
    go.write_text("")
    agent.wait_for("process", WAIT, conversation_id=cid, process_id="p1", phase="exited")
    output = agent.named("process", conversation_id=cid, process_id="p1", phase="output")
    assert "".join(e["delta"] for e in output) == "A€!", output
    for before, then in itertools.pairwise(output):
        assert then["offset"] == before["offset"] + len(before["delta"].encode())
    assert output_of(agent, cid, "p1")["text"] == "A€!"
    assert output_of(agent, cid, "p1", offset=2)["text"] == "!"  # from inside the character


def test_a_process_the_page_restarts_is_the_users(agent: EventClient) -> None:
    started, cid = run_calls(agent, [("run_command", {"command": "sleep 301",
                                                      "background": True})])  # fmt: skip
    assert "running in the background as p1" in started[0]["output"], started
    ack = agent.call("restart_process", {"conversation_id": cid, "process_id": "p1"})
    assert ack["ok"] and ack["process"]["id"] == "p2", ack
    assert ack["process"]["origin"] == "user" and ack["process"]["command"] == "sleep 301"
    first = agent.wait_for("process", WAIT, conversation_id=cid, process_id="p1", phase="started")
    again = agent.wait_for("process", WAIT, conversation_id=cid, process_id="p2", phase="started")
    assert (first["origin"], again["origin"]) == ("agent", "user")
    listed = agent.call("list_processes", {"conversation_id": cid})["processes"]
    assert [(p["id"], p["origin"], p["running"]) for p in listed] == [
        ("p1", "agent", False),
        ("p2", "user", True),
    ]
    assert agent.call("stop_process", {"conversation_id": cid, "process_id": "p2"})["ok"]
