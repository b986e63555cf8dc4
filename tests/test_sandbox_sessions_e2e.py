"""Sandbox sessions in the real server (`main.py web`, local sandbox under bubblewrap): a
process flooding output or fifty sessions at once leave the server answering as usual, and
no process outlives the server, stopped or killed; after a restart the records say what
ended with it."""

from __future__ import annotations

import json
import os
import signal
import statistics
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from modules.sandbox.cgroup import CGROUP_PREFIX, find_roots
from tests.fake_llm import Call, FakeLLM, Reply
from tests.fake_llm.replies import RecordedRequest, Response
from tests.kit.clients import EventClient, ack_latency, connected
from tests.kit.processes import live_command_lines
from tests.kit.raw_socket import RawSocketIO
from tests.kit.server import ServerProcess, serving
from tests.kit.settings import TOKEN
from tests.kit.waits import wait_until
from web.transport.client_queue_cap import STALL_SECONDS

pytestmark = [pytest.mark.e2e]

TASK_SECONDS = 60
ENV = {"AGENT_SANDBOX": "local"}
SLOW_BYTES_PER_SECOND = 3_000_000  # how fast a slow client reads


def run_what_is_asked(request: RecordedRequest) -> Response:
    """The model runs each message's first line as a command (what the server adds for the
    model follows on later lines), then says it is done."""
    last = request.messages[-1] if request.messages else {}
    if isinstance(last, dict) and last.get("role") == "tool":
        return Reply(content="done")
    command = request.last_user_text.split("\n", 1)[0]
    return Reply(tool_calls=[Call("run_command", {"command": command})])


@pytest.fixture
def server(
    tmp_path: Path, fake_llm: FakeLLM, request: pytest.FixtureRequest
) -> Iterator[ServerProcess]:
    """In threading mode, or the mode a test's indirect parameter names."""
    fake_llm.responder = run_what_is_asked
    mode = getattr(request, "param", "threading")
    with serving(tmp_path, fake_llm, ENV, {}, async_mode=mode) as process:
        yield process


@pytest.fixture
def client(server: ServerProcess) -> Iterator[EventClient]:
    with connected(server.url) as connection:
        sandbox = connection.call("get_status")["sandbox"]
        if sandbox["kind"] != "bubblewrap":
            pytest.skip("bubblewrap is not usable here")
        assert sandbox["sessions"] is True
        assert any(line.startswith("sessions: ") for line in sandbox["isolation"])
        yield connection


def result_of(client: EventClient, command: str, conversation_id: str | None = None) -> Any:
    """Run `command` as a task's one tool call; its result event's payload (and the id)."""
    cid = client.start(command, conversation_id)
    events = client.wait_done(cid, TASK_SECONDS)
    results = [e.payload for e in events if e.name == "tool" and e.payload["phase"] == "result"]
    assert len(results) == 1, events
    return results[0], cid


def records(server: ServerProcess, cid: str) -> list[dict[str, Any]]:
    index = server.data_dir / "processes" / cid / "index.json"
    return list(json.loads(index.read_text())["processes"])


def ours(server: ServerProcess, marker: str) -> list[str]:
    """Live processes of this server's sandboxes: its bwraps (they name its workspace) and
    what runs `marker`."""
    return [line for line in live_command_lines().values()
            if marker in line or f"--bind {server.workspace}" in line]  # fmt: skip


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_stopping_the_server_ends_every_session(
    server: ServerProcess, client: EventClient, signum: int
) -> None:
    marker = f"sleep 36{time.time_ns() % 10**6}"
    cids = []
    for _ in range(2):
        result, cid = result_of(client, f"{marker} &")
        assert "left running in the background: p1" in result["output"], result
        cids.append(cid)
    assert len([line for line in ours(server, marker) if line.startswith("sleep")]) == 2
    client.disconnect()
    server.stop(signum=signum)
    assert not ours(server, marker)
    for cid in cids:
        assert [r["end_reason"] for r in records(server, cid)] == ["server_stopped"]


def test_a_killed_server_leaves_no_process_and_a_restart_says_what_ended(
    server: ServerProcess, client: EventClient
) -> None:
    marker = f"sleep 37{time.time_ns() % 10**6}"
    result, cid = result_of(client, f"{marker} &")
    assert "left running" in result["output"], result
    killed_pid = server.pid
    assert killed_pid is not None
    client.disconnect()
    killed = time.monotonic()
    server.stop(signum=signal.SIGKILL)
    wait_until(lambda: not ours(server, marker), 5, "no process of its sandboxes left")
    print(f"\nkill -9: every sandbox process gone {time.monotonic() - killed:.3f} s later")
    assert records(server, cid)[0]["ended_at"] is None  # nobody could write its end
    server.start()
    with connected(server.url) as again:
        result, _ = result_of(again, "echo again", cid)
    assert result["ok"] and "again" in result["output"]
    assert [(r["id"], r["end_reason"]) for r in records(server, cid)] == [("p1", "server_stopped")]
    for root in find_roots().folders if os.geteuid() == 0 else []:
        assert not list(root.glob(f"{CGROUP_PREFIX}{killed_pid}-*"))  # reaped at the restart


def test_a_flood_of_output_leaves_the_server_and_other_conversations_answering(
    server: ServerProcess, client: EventClient
) -> None:
    baseline = max(ack_latency(client) for _ in range(5))
    memory_before = _rss_mb(server)
    result, _ = result_of(client, "yes flood-flood-flood &")
    assert "left running in the background: p1 `yes flood-flood-flood`" in result["output"]
    latencies, durations = [], []
    flooding = time.monotonic()
    while time.monotonic() - flooding < 10:
        latencies.append(ack_latency(client))
        quiet, _ = result_of(client, "echo quiet")
        assert quiet["ok"] and "quiet" in quiet["output"], quiet
        durations.append(quiet["duration_ms"])
    grown = _rss_mb(server) - memory_before
    print(f"\nflood: get_status {baseline * 1000:.0f} ms before, at most "
          f"{max(latencies) * 1000:.0f} ms during ({len(latencies)} asked); another "
          f"conversation's command at most {max(durations)} ms; "
          f"server memory +{grown:.0f} MB")  # fmt: skip
    assert max(latencies) < 0.5, latencies  # about 10 ms here, loaded or not
    assert max(durations) < 2000, durations  # about 200 ms here
    assert grown < 64, f"the server grew by {grown:.0f} MB while a process flooded"


@pytest.mark.parametrize("server", ["threading", "eventlet"], indirect=True)
def test_a_client_reading_slowly_paces_a_flood_and_stays_connected(
    server: ServerProcess, client: EventClient
) -> None:
    """A client far behind is sent no more output until it catches up: the process waits on
    its writes, the client keeps its connection (dropped past its queue's 8 MB before) and
    gets every byte in order."""
    memory_before = _rss_mb(server)
    result, cid = result_of(client, "yes flood-flood-flood &")
    assert "left running in the background: p1" in result["output"], result
    slow = RawSocketIO(server.port, TOKEN, receive_buffer=16384)
    received: list[tuple[int, int]] = []  # (offset, bytes) of each output event
    try:
        assert slow.call("join", {"conversation_id": cid})["ok"]
        while sum(size for _, size in received) < 12_000_000:
            frame = slow.read_frame()
            assert frame is not None, "the slow client was dropped"
            if frame.startswith('42["process"'):
                payload = json.loads(frame[2:])[1]
                if payload["phase"] == "output":
                    received.append((payload["offset"], len(payload["delta"].encode())))
                    time.sleep(received[-1][1] / SLOW_BYTES_PER_SECOND)
        produced = client.call("list_processes", {"conversation_id": cid})["processes"][0]
        grown = _rss_mb(server) - memory_before
    finally:
        slow.close()
    ends = [offset + size for offset, size in received]
    starts = [offset for offset, _ in received[1:]]
    assert ends[:-1] == starts, "a gap in the output"
    ahead = produced["output_end"] - ends[-1]
    print(f"\nslow client: {sum(s for _, s in received) / 1e6:.0f} MB received in order; "
          f"the process {ahead / 1e6:.1f} MB ahead of it; server +{grown:.0f} MB")  # fmt: skip
    assert ahead < 24_000_000, "the process was not paced to the slow client"
    assert grown < 64, f"the server grew by {grown:.0f} MB"


def test_a_client_that_reads_nothing_holds_a_flood_back_only_a_while(
    server: ServerProcess, client: EventClient
) -> None:
    result, cid = result_of(client, "yes flood-flood-flood &")
    assert "left running in the background: p1" in result["output"], result
    stuck = RawSocketIO(server.port, TOKEN, receive_buffer=4096)

    def produced() -> int:
        processes = client.call("list_processes", {"conversation_id": cid})["processes"]
        return int(processes[0]["output_end"])

    def dropped() -> list[str]:
        lines = (server.data_dir / "logs" / "agent.jsonl").read_text().splitlines()
        messages = [json.loads(line)["message"] for line in lines]
        return [message for message in messages if message.startswith("client dropped")]

    try:
        assert stuck.call("join", {"conversation_id": cid})["ok"]
        stuck.stop_reading()

        def held() -> bool:  # the process waits on its writes: none for a second
            before = produced()
            time.sleep(1)
            return produced() == before

        wait_until(held, 10, "the flood held back for the client reading nothing")
        assert not dropped()
        wait_until(dropped, STALL_SECONDS + 10, "the client reading nothing dropped", every=0.5)
        assert dropped() == [f"client dropped: it took nothing of what waited for it for "
                             f"{STALL_SECONDS:g} s"]  # fmt: skip
        resumed = produced()
        wait_until(lambda: produced() > resumed + 8_000_000, 20, "the flood going on")
    finally:
        stuck.close()


def test_fifty_sessions_each_running_a_process_leave_get_status_quick(
    server: ServerProcess, client: EventClient
) -> None:
    marker = f"sleep 38{time.time_ns() % 10**6}"
    before = [ack_latency(client) for _ in range(10)]
    started = time.monotonic()
    cids = [client.start(f"{marker} &") for _ in range(50)]
    for cid in cids:
        client.wait_done(cid, TASK_SECONDS * 2)
    took = time.monotonic() - started
    running = [line for line in ours(server, marker) if line.startswith("sleep")]
    assert len(running) == 50
    during = [ack_latency(client) for _ in range(20)]
    median_before, median_during = statistics.median(before), statistics.median(during)
    print(f"\n50 sessions started in {took:.1f} s; get_status median "
          f"{median_before * 1000:.0f} ms before, {median_during * 1000:.0f} ms "
          f"(max {max(during) * 1000:.0f} ms) with 50 running")  # fmt: skip
    assert max(during) < 0.5, during


def _rss_mb(server: ServerProcess) -> float:
    for line in Path(f"/proc/{server.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")
