"""A person's terminals among the conversation's processes, through the real server, the
local sandbox under bubblewrap and the fake model making the calls a message lists: the
model's process_list and the page's list_processes show each as the person's terminal with
what runs in it now, and neither the model's process tools nor the page's process ops can
type into it, read it, stop it or restart it."""

from __future__ import annotations

from typing import Any

import pytest

from tests.kit.clients import EventClient
from tests.kit.model import run_calls
from tests.kit.terminal_ops import WAIT, open_terminal, screen, shows, type_in
from tests.kit.waits import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.server(env={"AGENT_SANDBOX": "local"})]


def listed(client: EventClient, cid: str, tid: str) -> dict[str, Any]:
    processes = client.call("list_processes", {"conversation_id": cid})["processes"]
    [mine] = [p for p in processes if p["id"] == tid]
    return dict(mine)


def test_the_agent_and_the_page_see_what_runs_in_the_persons_terminal(
    agent: EventClient,
) -> None:
    cid = run_calls(agent, [("run_command", {"command": "true"})])[1]
    tid = open_terminal(agent, cid)
    type_in(agent, cid, tid, "echo ready-$((3*5))\n")
    shows(agent, cid, tid, "ready-15")
    item = listed(agent, cid, tid)
    assert (item["terminal"], item["origin"], item["running"]) == (True, "user", True), item
    assert item["foreground"] is None, item  # at its prompt
    type_in(agent, cid, tid, "sleep 301\n")
    wait_until(lambda: listed(agent, cid, tid)["foreground"] == "sleep 301", WAIT,
               "the terminal listed running sleep 301")  # fmt: skip

    [result], _ = run_calls(agent, [("process_list", {})], cid)
    assert result["ok"], result
    line = next(x for x in result["output"].splitlines() if x.startswith(f"{tid} "))
    assert "the person's own terminal" in line and "`sleep 301` in it" in line, line

    type_in(agent, cid, tid, "\x03")
    wait_until(lambda: listed(agent, cid, tid)["foreground"] is None, WAIT, "back at its prompt")
    assert agent.call("terminal_close", {"conversation_id": cid, "terminal_id": tid})["ok"]
    wait_until(lambda: not listed(agent, cid, tid)["running"], WAIT, "the terminal listed ended")


def test_neither_the_model_nor_the_process_ops_use_the_persons_terminal(
    agent: EventClient,
) -> None:
    cid = run_calls(agent, [("run_command", {"command": "true"})])[1]
    tid = open_terminal(agent, cid)
    calls: list[tuple[str, dict[str, Any]]] = [
        ("process_input", {"process_id": tid, "text": "echo typed-by-the-model\n"}),
        ("process_output", {"process_id": tid}),
        ("process_stop", {"process_id": tid}),
    ]
    results, _ = run_calls(agent, calls, cid)
    for (name, _args), result in zip(calls, results, strict=True):
        assert not result["ok"], (name, result)
        assert f"{tid} is a person's terminal" in result["output"], (name, result)
    ref = {"conversation_id": cid, "process_id": tid}
    for op in ("stop_process", "process_output", "restart_process"):
        ack = agent.call(op, {**ref, "offset": 0} if op == "process_output" else ref)
        assert not ack["ok"] and "terminal" in ack["error"]["message"], (op, ack)
    type_in(agent, cid, tid, "echo still-mine-$((6*6))\n")
    shows(agent, cid, tid, "still-mine-36")
    assert "typed-by-the-model" not in screen(agent, cid, tid)
    assert listed(agent, cid, tid)["running"]
    assert agent.call("terminal_close", {"conversation_id": cid, "terminal_id": tid})["ok"]
