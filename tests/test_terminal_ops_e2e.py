"""A person's terminal through the real server (`main.py web`, the local sandbox under
bubblewrap) and the real Socket.IO client: a bash on a PTY in the conversation's sandbox
session, beside the agent's processes (the fake model starts them), resized, reattached with
its scrollback, confined like the agent's commands, and refused to whoever may not use it."""

from __future__ import annotations

import json
import time

import pytest

from tests.kit.clients import EventClient, connected
from tests.kit.model import run_calls
from tests.kit.raw_socket import RawSocketIO
from tests.kit.server import ServerProcess
from tests.kit.settings import TOKEN
from tests.kit.terminal_ops import WAIT, open_terminal, screen, shows, type_in
from tests.kit.waits import wait_until
from workspace_client.connection import ConnectionRefused

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.server(
        env={"AGENT_SANDBOX": "local", "AGENT_PROCESS_SETTLE_SECONDS": "0.5"},
        files={"site/marker.txt": "served-by-the-agent\n"},
    ),
]
SLOW_BYTES_PER_SECOND = 3_000_000  # how fast a slow client reads


def conversation(client: EventClient) -> str:
    """A new conversation (one task that runs `true`)."""
    return run_calls(client, [("run_command", {"command": "true"})])[1]


def test_the_terminal_runs_beside_the_agents_server(agent: EventClient) -> None:
    serve = "cd site && exec python3 -m http.server 8765 --bind 127.0.0.1"
    started, cid = run_calls(agent, [("run_command", {"command": serve, "background": True})])
    assert "running in the background as p1" in started[0]["output"], started
    tid = open_terminal(agent, cid)
    type_in(agent, cid, tid, "echo $((6*7))x\n")
    shows(agent, cid, tid, "42x")
    type_in(
        agent, cid, tid, "curl -s --retry 20 --retry-connrefused http://127.0.0.1:8765/marker.txt\n"
    )
    shows(agent, cid, tid, "served-by-the-agent")
    listed = agent.call("list_processes", {"conversation_id": cid})["processes"]
    mine = [p for p in listed if p["id"] == tid]
    assert mine and mine[0]["origin"] == "user" and mine[0]["running"], listed
    assert mine[0]["command"] == "bash (terminal)", mine
    assert agent.call("stop_process", {"conversation_id": cid, "process_id": "p1"})["ok"]
    assert agent.call("terminal_close", {"conversation_id": cid, "terminal_id": tid})["ok"]
    listed = agent.call("list_processes", {"conversation_id": cid})["processes"]
    assert [p["running"] for p in listed if p["id"] == tid] == [False], listed


def test_resize_ctrl_c_and_exit(agent: EventClient) -> None:
    cid = conversation(agent)
    tid = open_terminal(agent, cid, rows=24, cols=80)
    ref = {"conversation_id": cid, "terminal_id": tid}
    assert agent.call("terminal_resize", {**ref, "rows": 31, "cols": 101})["ok"]
    type_in(agent, cid, tid, "stty size\n")
    shows(agent, cid, tid, "31 101")
    type_in(agent, cid, tid, "echo start-$((4*4)); sleep 300; echo slept-$((1+1))\n")
    shows(agent, cid, tid, "start-16")
    type_in(agent, cid, tid, "\x03")  # the PTY flushes what was typed before it: wait
    wait_until(lambda: screen(agent, cid, tid).rstrip().endswith("$"), WAIT, "the prompt again",
               details=lambda: repr(screen(agent, cid, tid)[-400:]))  # fmt: skip
    type_in(agent, cid, tid, "echo after-$((2+3))\n")
    shows(agent, cid, tid, "after-5")
    assert "slept-2" not in screen(agent, cid, tid)
    type_in(agent, cid, tid, "exit\n")
    agent.wait_for("terminal", WAIT, conversation_id=cid, terminal_id=tid, ended=True)
    gone = agent.call("terminal_input", {**ref, "data": "x"})
    assert not gone["ok"] and gone["error"]["code"] == "not_found", gone
    assert agent.call("list_terminals", {"conversation_id": cid})["terminals"] == []


def test_a_reload_reattaches_with_the_scrollback(agent: EventClient, server: ServerProcess) -> None:
    cid = conversation(agent)
    tid = open_terminal(agent, cid)
    type_in(agent, cid, tid, "for i in 1 2 3; do echo line-$i$i; done\n")
    shows(agent, cid, tid, "line-33")
    with connected(server.url) as reloaded:
        listed = reloaded.call("list_terminals", {"conversation_id": cid})["terminals"]
        assert [t["terminal_id"] for t in listed] == [tid], listed
        ack = reloaded.call("terminal_attach", {"conversation_id": cid, "terminal_id": tid})
        assert ack["ok"] and "line-11" in ack["data"] and "line-33" in ack["data"], ack
        assert ack["offset"] == 0 and ack["next_offset"] >= len(ack["data"].encode())
        type_in(reloaded, cid, tid, "echo again-$((3*3))\n")
        shows(reloaded, cid, tid, "again-9")
        first = reloaded.named("terminal", conversation_id=cid, terminal_id=tid)[0]
        assert first["offset"] == ack["next_offset"], first  # live from where the scrollback ended
    shows(agent, cid, tid, "again-9")  # the first page still follows it
    assert agent.call("terminal_close", {"conversation_id": cid, "terminal_id": tid})["ok"]


def test_the_shell_is_in_the_sandbox(agent: EventClient, server: ServerProcess) -> None:
    outside = server.workspace.parent / "host-secret.txt"
    outside.write_text("host-only\n")
    cid = conversation(agent)
    tid = open_terminal(agent, cid)
    type_in(agent, cid, tid, f"cat {outside} || echo no-such-$((7*7))\n")
    shows(agent, cid, tid, "no-such-49")
    type_in(agent, cid, tid, "echo pid1-$(tr '\\0' ' ' < /proc/1/cmdline)-end\n")
    shows(agent, cid, tid, "supervisor.py")  # PID 1 of its namespace: the session's supervisor
    type_in(agent, cid, tid, "pwd; echo cwd-$((8*8))\n")
    shows(agent, cid, tid, "cwd-64")
    assert "host-only" not in screen(agent, cid, tid)
    assert agent.call("terminal_close", {"conversation_id": cid, "terminal_id": tid})["ok"]


def test_what_may_not_use_a_terminal_is_refused(agent: EventClient, server: ServerProcess) -> None:
    cid, other = conversation(agent), conversation(agent)
    tid = open_terminal(agent, cid)
    foreign = {"conversation_id": other, "terminal_id": tid}
    ops: list[tuple[str, dict[str, object]]] = [
        ("terminal_input", {"data": "id\n"}),
        ("terminal_attach", {}),
        ("terminal_close", {}),
        ("terminal_resize", {"rows": 5, "cols": 20}),
    ]
    for op, extra in ops:
        ack = agent.call(op, {**foreign, **extra})
        assert not ack["ok"] and ack["error"]["code"] == "not_found", (op, ack)
    unknown = agent.call("terminal_open", {"conversation_id": "nope" * 8})
    assert not unknown["ok"] and unknown["error"]["code"] == "not_found", unknown
    big = agent.call("terminal_input", {"conversation_id": cid, "terminal_id": tid,
                                        "data": "x" * 20_000})  # fmt: skip
    assert not big["ok"] and big["error"]["code"] == "bad_request", big
    tiny = agent.call("terminal_resize", {"conversation_id": cid, "terminal_id": tid,
                                          "rows": 1, "cols": 5})  # fmt: skip
    assert not tiny["ok"] and tiny["error"]["code"] == "bad_request", tiny
    with pytest.raises(ConnectionRefused, match="wrong token"), connected(server.url, token="no"):
        pass
    with connected(server.url) as bystander:  # connected, never attached: sees nothing
        type_in(agent, cid, tid, "echo private-$((5*5))\n")
        shows(agent, cid, tid, "private-25")
        assert bystander.named("terminal") == []
    assert agent.call("terminal_close", {"conversation_id": cid, "terminal_id": tid})["ok"]


def test_a_client_reading_slowly_paces_its_terminal(
    agent: EventClient, server: ServerProcess
) -> None:
    """A flood in a terminal whose client reads slowly waits for it (the PTY fills, `yes`
    waits on its writes): the client keeps its connection and gets every byte in order."""
    cid = conversation(agent)
    slow = RawSocketIO(server.port, TOKEN, receive_buffer=16384)
    received: list[tuple[int, int]] = []  # (offset, bytes) of each output event
    try:
        opened = slow.call("terminal_open", {"conversation_id": cid, "rows": 24, "cols": 80})
        ref = {"conversation_id": cid, "terminal_id": opened["terminal_id"]}
        assert slow.call("terminal_input", {**ref, "data": "yes flood-flood-flood\n"}, 2)["ok"]
        while sum(size for _, size in received) < 6_000_000:
            frame = slow.read_frame()
            assert frame is not None, "the slow client was dropped"
            if frame.startswith('42["terminal"'):
                payload = json.loads(frame[2:])[1]
                received.append((payload["offset"], len(payload["data"].encode())))
                time.sleep(received[-1][1] / SLOW_BYTES_PER_SECOND)
    finally:
        slow.close()
    ends = [offset + size for offset, size in received]
    assert ends[:-1] == [offset for offset, _ in received[1:]], "a gap in the output"
