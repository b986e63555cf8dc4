"""The seq of `process` events sent between tasks, across a server restart, through the real
server (`main.py web`, the local sandbox under bubblewrap) and the fake model: no task end
stores those seqs, so the server reserves them in meta.json, and after a restart the `exited`
event of a process it left running comes after every seq a page saw, so a page that joins
with the last seq it has is replayed it."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fake_llm import FakeLLM
from tests.kit.clients import connected
from tests.kit.events import Received, payloads
from tests.kit.model import calls_in_the_message, run_calls
from tests.kit.server import ServerProcess, serving

pytestmark = [pytest.mark.e2e]

WAIT_SECONDS = 90
ENV = {"AGENT_SANDBOX": "local", "AGENT_PROCESS_SETTLE_SECONDS": "0.5"}
# Prints only once the test says so (the task has ended by then), then stays.
COMMAND = "until [ -e go ]; do sleep 0.1; done; for i in 1 2 3; do echo line$i; done; sleep 3917"


def output_of(events: list[Received]) -> str:
    """The output the `process` events carried."""
    return "".join(e.get("delta") or "" for e in payloads(events, "process", phase="output"))


@pytest.fixture
def server(tmp_path: Path, fake_llm: FakeLLM) -> Iterator[ServerProcess]:
    fake_llm.responder = calls_in_the_message
    with serving(tmp_path, fake_llm, ENV, {}) as process:
        yield process


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGINT], ids=["killed", "stopped"])
def test_the_exited_event_after_a_restart_follows_every_seq_a_page_saw_between_tasks(
    server: ServerProcess, signum: int
) -> None:
    with connected(server.url) as page:
        if page.call("get_status")["sandbox"]["kind"] != "bubblewrap":
            pytest.skip("bubblewrap is not usable here")
        started, cid = run_calls(page, [("run_command", {"command": COMMAND, "background": True})])
        assert "running in the background as p1" in started[0]["output"], started
        done_seq = page.dones(cid)[-1]["seq"]
        (server.workspace / "go").touch()
        page.wait_until(lambda events: "line3" in output_of(events), WAIT_SECONDS, "line3")
        seen = max(e["seq"] for e in page.named("process", conversation_id=cid))
    assert seen > done_seq  # the output came between tasks
    server.restart(signum=signum)

    with connected(server.url) as page:
        joined = page.call("join", {"conversation_id": cid, "after_seq": seen})
        assert joined["ok"] and joined["last_seq"] > seen, joined
        exited = page.wait_for("process", WAIT_SECONDS, conversation_id=cid, phase="exited")
    assert exited["process_id"] == "p1" and exited["reason"] == "server_stopped", exited
    assert exited["seq"] > seen, (exited, seen)
