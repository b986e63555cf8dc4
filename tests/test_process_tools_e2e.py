"""Background processes for the model, through the real server (`main.py web`, the local
sandbox under bubblewrap) and the fake model: a server started in the background, waited for,
fetched in a later call, its log read, stopped; an early failure, `cmd &` and the limit."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fake_llm import FakeLLM
from tests.kit.clients import EventClient, connected
from tests.kit.model import calls_in_the_message, run_calls
from tests.kit.server import ServerProcess, serving

pytestmark = [pytest.mark.e2e]

TASK_SECONDS = 90
ENV = {"AGENT_SANDBOX": "local", "AGENT_MAX_PROCESSES": "2"}
SERVER = "python3 -u -m http.server 8000 --bind 127.0.0.1"
FETCH = (
    'python3 -c "import urllib.request as u; '
    "print('status', u.urlopen('http://127.0.0.1:8000/').status)\""
)


@pytest.fixture
def server(tmp_path: Path, fake_llm: FakeLLM) -> Iterator[ServerProcess]:
    fake_llm.responder = calls_in_the_message
    with serving(tmp_path, fake_llm, ENV, {}) as process:
        yield process


@pytest.fixture
def client(server: ServerProcess) -> Iterator[EventClient]:
    with connected(server.url) as connection:
        if connection.call("get_status")["sandbox"]["kind"] != "bubblewrap":
            pytest.skip("bubblewrap is not usable here")
        yield connection


def test_a_server_in_the_background_is_waited_for_fetched_read_and_stopped(
    client: EventClient,
) -> None:
    started, cid = run_calls(client, [
        ("run_command", {"command": SERVER, "background": True}),
        ("process_output", {"process_id": "p1", "pattern": "Serving HTTP", "wait_seconds": 30}),
    ])  # fmt: skip
    assert started[0]["ok"], started[0]
    assert "running in the background as p1" in started[0]["output"]
    assert started[1]["ok"] and "Serving HTTP on 127.0.0.1 port 8000" in started[1]["output"]
    assert "listening on 8000" in started[1]["output"], started[1]

    used, _ = run_calls(client, [
        ("run_command", {"command": FETCH}),
        ("process_output", {"process_id": "p1", "wait_seconds": 30}),
        ("process_list", {}),
        ("process_stop", {"process_id": "p1"}),
        ("process_output", {"process_id": "p1"}),
    ], cid)  # fmt: skip
    fetched, log, listed, stopped, after = used
    assert fetched["ok"] and "status 200" in fetched["output"], fetched
    assert log["ok"] and '"GET / HTTP/1.1" 200' in log["output"], log
    assert "Serving HTTP" not in log["output"]  # without a pattern: only what is new
    assert "1 of at most 2 running" in listed["output"]
    assert f"p1 `{SERVER}`" in listed["output"] and "listening on 8000" in listed["output"]
    assert stopped["ok"] and "ended (stopped)" in stopped["output"], stopped
    assert after["ok"] and "ended (stopped)" in after["output"]

    exited = client.wait_for("process", TASK_SECONDS, conversation_id=cid, phase="exited")
    assert exited["process_id"] == "p1" and exited["reason"] == "stopped", exited
    seen = client.named("process", conversation_id=cid, process_id="p1")
    assert next(e["phase"] for e in seen) == "started" and seen[0]["command"] == SERVER
    assert seen[0]["origin"] == "agent" and isinstance(seen[0]["pid"], int)
    output = [e for e in seen if e["phase"] == "output"]
    assert output[0]["offset"] == 0
    for before, then in itertools.pairwise(output):  # contiguous batches
        assert then["offset"] == before["offset"] + len(before["delta"].encode())
    text = "".join(e["delta"] for e in output)
    assert "Serving HTTP on 127.0.0.1" in text and '"GET / HTTP/1.1" 200' in text
    seqs = [e["seq"] for e in seen]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)

    with connected(client.url) as late:  # a page that joins later is replayed them
        ack = late.call("join", {"conversation_id": cid, "after_seq": 0})
        assert ack["ok"], ack
        replayed = late.named("process", conversation_id=cid, process_id="p1")
    assert replayed[-1]["phase"] == "exited" and replayed[-1]["seq"] == exited["seq"]
    assert any('"GET / HTTP/1.1" 200' in (e.get("delta") or "") for e in replayed)


def test_an_early_failure_says_its_exit_code_and_output(client: EventClient) -> None:
    results, _ = run_calls(client, [
        ("run_command", {"command": SERVER, "background": True}),
        ("run_command", {"command": SERVER, "background": True}),
        ("run_command", {"command": "python3 -c 'import no_such_module'", "background": True}),
    ])  # fmt: skip
    first, second, missing = results
    assert first["ok"]
    assert not second["ok"] and "It ended at once" in second["output"], second
    assert "exit code 1" in second["output"] and "Address already in use" in second["output"]
    assert not missing["ok"] and "No module named 'no_such_module'" in missing["output"]


def test_the_limit_and_what_a_command_leaves_running(client: EventClient) -> None:
    results, _ = run_calls(client, [
        ("run_command", {"command": "sleep 300 &"}),
        ("run_command", {"command": "sleep 301", "background": True}),
        ("run_command", {"command": "sleep 302", "background": True}),
        ("process_stop", {"process_id": "p1", "signal": "KILL"}),
        ("process_output", {"process_id": "p9"}),
        ("process_output", {"process_id": "p2", "pattern": "(unclosed"}),
        ("process_input", {"process_id": "p2", "text": "hello\n", "eof": True}),
    ])  # fmt: skip
    adopted, second, over, stopped, unknown, bad, written = results
    assert "left running in the background: p1 `sleep 300`" in adopted["output"], adopted
    assert second["ok"] and "running in the background as p2" in second["output"]
    assert not over["ok"] and "at most 2 background processes" in over["output"], over
    assert stopped["ok"] and "p1 `sleep 300`" in stopped["output"]
    assert not unknown["ok"] and "no process p9" in unknown["output"]
    assert not bad["ok"] and "not a valid regular expression" in bad["output"]
    assert written["ok"] and "Wrote 6 bytes to p2; its input is closed" in written["output"]


def test_the_page_lists_reads_stops_and_restarts_a_process(client: EventClient) -> None:
    results, cid = run_calls(client, [("run_command", {"command": SERVER, "background": True})])
    assert results[0]["ok"], results[0]
    listed = client.call("list_processes", {"conversation_id": cid})
    assert listed["ok"] and isinstance(listed["seq"], int), listed
    [p1] = listed["processes"]
    assert p1["id"] == "p1" and p1["command"] == SERVER and p1["running"] is True
    read = client.call("process_output", {"conversation_id": cid, "process_id": "p1"})
    assert read["ok"] and read["offset"] == 0 and "Serving HTTP" in read["text"], read
    assert read["next_offset"] == len(read["text"].encode()) and read["running"] is True
    unknown = client.call("stop_process", {"conversation_id": cid, "process_id": "p7"})
    assert unknown["error"]["code"] == "not_found", unknown
    restarted = client.call("restart_process", {"conversation_id": cid, "process_id": "p1"})
    assert restarted["ok"] and restarted["process"]["id"] == "p2", restarted
    assert restarted["process"]["command"] == SERVER
    stopped = client.call("stop_process", {"conversation_id": cid, "process_id": "p2"})
    assert stopped["ok"] and stopped["process"]["end_reason"] == "stopped", stopped
    ended = client.call("list_processes", {"conversation_id": cid})["processes"]
    assert [(p["id"], p["end_reason"]) for p in ended] == [("p1", "stopped"), ("p2", "stopped")]
    missing = client.call("list_processes", {"conversation_id": "nope"})
    assert missing["error"]["code"] == "not_found"
