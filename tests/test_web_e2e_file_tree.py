"""The real server process's file tree events, in both async modes, and a large workspace's."""

from __future__ import annotations

import itertools
import json
import threading
import time
from pathlib import Path

import pytest

from tests.fake_llm import Call, FakeLLM, Reply
from tests.kit import Received, wait_until
from tests.web_helpers import EventClient, ServerProcess, ack_latency, assert_contiguous, connected

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("clean_fake")]

ASYNC_MODES = ["threading", "eventlet"]


def probe_watcher(client: EventClient, workspace: Path, timeout: float = 15) -> None:
    """Wait until the workspace watcher reports changes (its child process is up)."""
    probes = itertools.count()

    def reported() -> bool:
        probe = workspace / f"watch-probe-{next(probes)}.txt"
        probe.write_text("probe")
        try:
            return bool(client.wait_until(lambda evs: _tree_event(evs, probe.name), 0.5, "probe"))
        except AssertionError:
            return False
        finally:
            probe.unlink()

    wait_until(reported, timeout, "the watcher to report a change", every=0)


def _tree_event(
    events: list[Received], path: str, *, with_seq: bool | None = None
) -> Received | None:
    for event in events:
        if event.name != "file_tree":
            continue
        if with_seq is not None and ("seq" in event.payload) != with_seq:
            continue
        if any(path in (c["path"], c.get("dest_path")) for c in event.payload["changes"]):
            return event
    return None


# --- the agent's changes and the user's --------------------------------------------------


def test_tool_phases_and_file_tree_events(
    server: ServerProcess, fake: FakeLLM, client: EventClient
):
    probe_watcher(client, server.workspace)
    fake.script(
        Reply(
            tool_calls=[Call("create_file", {"path": "made/by_agent.txt", "content": "hi"})],
            chunk_size=4,
        ),
        Reply(content="created"),
    )
    cid = client.start("create a file")
    events = client.wait_done(cid)
    assert_contiguous(events)
    tool = [e.payload for e in events if e.name == "tool"]
    phases = [t["phase"] for t in tool]
    assert phases[0] == "start" and phases[-2:] == ["end", "result"]
    assert set(phases[1:-2]) == {"args"} and len(phases) > 3
    assert len({t["call_id"] for t in tool}) == 1 and {t["name"] for t in tool} == {"create_file"}
    assert json.loads("".join(t["delta"] for t in tool if t["phase"] == "args")) == {
        "path": "made/by_agent.txt",
        "content": "hi",
    }
    assert tool[-2]["arguments"]["path"] == "made/by_agent.txt"
    assert tool[-1]["ok"] is True and isinstance(tool[-1]["duration_ms"], int)
    result_at = next(e.at for e in events if e.name == "tool" and e.payload["phase"] == "result")
    in_task = _tree_event(events, "made/by_agent.txt", with_seq=True)
    assert in_task is not None and in_task.at - result_at < 1.0
    live = client.wait_until(
        lambda evs: _tree_event(evs, "made/by_agent.txt", with_seq=False),
        2,
        "watcher event for the agent's file",
    )
    assert live.at - result_at < 1.0
    assert (server.workspace / "made" / "by_agent.txt").read_text() == "hi"


def test_file_tree_event_for_a_change_made_outside_the_agent(
    server: ServerProcess, client: EventClient
):
    probe_watcher(client, server.workspace)
    made_at = time.monotonic()
    (server.workspace / "outside.md").write_text("# made by hand\n")
    event = client.wait_until(lambda evs: _tree_event(evs, "outside.md"), 2, "file_tree")
    assert event.at - made_at < 1.0
    assert "seq" not in event.payload
    change = next(c for c in event.payload["changes"] if c["path"] == "outside.md")
    assert change["event"] in ("created", "modified") and change["is_dir"] is False
    moved_at = time.monotonic()
    (server.workspace / "outside.md").rename(server.workspace / "renamed.md")
    moved = client.wait_until(lambda evs: _tree_event(evs, "renamed.md"), 2, "move")
    assert moved.at - moved_at < 1.0


# --- a large workspace -----------------------------------------------------------------


def _many_files(root: Path, count: int) -> None:
    for n in range(count):
        folder = root / f"dir{n // 100:03d}"
        if n % 100 == 0:
            folder.mkdir(parents=True)
        (folder / f"file{n:05d}.txt").write_bytes(b"x")


def test_twenty_thousand_files_do_not_stall_the_server(fake: FakeLLM, tmp_path: Path):
    _many_files(tmp_path / "ws", 20_000)
    process = ServerProcess(
        tmp_path / "ws", tmp_path / "data", base_url=fake.base_url, api_key=fake.api_key
    )
    with process, connected(process.url) as sio:
        latencies: list[float] = []
        stop = threading.Event()

        def ping() -> None:
            until = time.monotonic() + 2
            while not stop.is_set() or time.monotonic() < until:
                latencies.append(ack_latency(sio))
                time.sleep(0.02)

        pinger = threading.Thread(target=ping)
        pinger.start()
        try:
            started = time.monotonic()
            tree = sio.call("get_file_tree", timeout=10)
            tree_seconds = time.monotonic() - started
            probe_watcher(sio, tmp_path / "ws", timeout=30)
        finally:
            stop.set()
            pinger.join()
    assert tree["ok"] and tree_seconds < 2.0, f"get_file_tree took {tree_seconds:.2f}s"
    assert len(latencies) > 20 and max(latencies) < 0.5, f"slowest ack {max(latencies):.2f}s"
