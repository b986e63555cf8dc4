"""A background process's output at full speed through the real server (`main.py web`, the
local sandbox under bubblewrap) to workspace_client: the session holds the process on its
pipe while the relay is behind, so 10 MB arrive whole and in order, and a flood neither
starves another process's output nor a task's tokens."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from core.process_relay import BATCH_SECONDS
from protocol.events import Done, Event, Process, Token, ToolEvent
from tests.fake_llm import Call, FakeLLM, Reply
from tests.kit.server import ServerProcess
from tests.kit.settings import TOKEN
from tests.kit.waits import wait_until
from workspace_client import Client

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.usefixtures("clean_fake"),
    pytest.mark.server(
        env={"AGENT_SANDBOX": "local", "AGENT_PROCESS_SETTLE_SECONDS": "0.2"},
        modes=["threading", "eventlet"],
    ),
]

WAIT_SECONDS = 120
LINE = 16  # "%015d\n": its number, so order and loss show
# Writes `lines` numbered lines in 64 KiB writes once the file `go` exists, then ends.
FLOOD = (
    "python3 -c 'import os,sys,time\n"
    "n=int(sys.argv[1]); tag=sys.argv[2]\n"
    "while not os.path.exists(tag): time.sleep(0.01)\n"
    "for s in range(0, n, 4096):\n"
    '    os.write(1, b"".join(b"%015d\\n" % i for i in range(s, min(n, s + 4096))))\n'
    "' {lines} {tag}"
)


@dataclass
class Received:
    """The output events of one process as the client got them, with when."""

    events: list[tuple[float, Process]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def take(self, event: Process) -> None:
        with self.lock:
            self.events.append((time.monotonic(), event))

    def text(self) -> str:
        with self.lock:
            return "".join(e.delta or "" for _, e in self.events)


@pytest.fixture
def client(server: ServerProcess) -> Iterator[Client]:
    with Client(server.url, TOKEN, timeout=30) as connected:
        if connected.status()["sandbox"]["kind"] != "bubblewrap":
            pytest.skip("bubblewrap is not usable here")
        yield connected


def start(client: Client, fake: FakeLLM, *commands: str) -> str:
    """A task whose model starts `commands` in the background (p1, p2, ...); its conversation."""
    calls = [
        Reply(tool_calls=[Call("run_command", {"command": c, "background": True})])
        for c in commands
    ]
    fake.script(*calls, Reply(content="started"))
    events = list(client.run("start them"))
    results = [e for e in events if isinstance(e, ToolEvent) and e.phase == "result"]
    assert [r.ok for r in results] == [True] * len(commands), results
    assert isinstance(events[-1], Done)
    return events[-1].conversation_id or ""


def outputs_of(client: Client, cid: str) -> dict[str, Received]:
    """Each process's output events from now on, as they come."""
    received: dict[str, Received] = {}

    def handle(event: Event) -> None:
        if isinstance(event, Process) and event.phase == "output":
            received.setdefault(event.process_id, Received()).take(event)

    client.subscribe(cid, handle)
    return received


def numbered(lines: int) -> str:
    return "".join(f"{i:015d}\n" for i in range(lines))


def test_ten_megabytes_arrive_whole_and_in_order(
    client: Client, fake: FakeLLM, server: ServerProcess
) -> None:
    lines = 10_000_000 // LINE
    cid = start(client, fake, FLOOD.format(lines=lines, tag="go"))
    received = outputs_of(client, cid)
    (server.workspace / "go").touch()
    wait_until(
        lambda: "p1" in received and len(received["p1"].text()) >= lines * LINE,
        WAIT_SECONDS,
        "the whole output",
    )
    events = [e for _, e in received["p1"].events]
    assert [e.skipped for e in events] == [None] * len(events)
    ends = [(e.offset or 0) + len((e.delta or "").encode()) for e in events]
    assert [e.offset for e in events] == [0, *ends[:-1]]  # contiguous
    assert received["p1"].text() == numbered(lines)


def test_a_flood_starves_neither_another_process_nor_a_task(
    client: Client, fake: FakeLLM, server: ServerProcess
) -> None:
    ticker = "for i in $(seq 1 300); do echo tick$i; sleep 0.05; done"
    flood = FLOOD.format(lines=10**12, tag="go2")  # until stopped
    cid = start(client, fake, flood, ticker)
    received = outputs_of(client, cid)
    (server.workspace / "go2").touch()
    wait_until(
        lambda: "p1" in received and len(received["p1"].events) > 20, WAIT_SECONDS, "a flood"
    )

    fake.script(Reply(content="y" * 60, chunk_size=1, delay=0.02))
    tokens = [time.monotonic() for e in client.run("talk", cid) if isinstance(e, Token)]
    task_end = time.monotonic()
    wait_until(lambda: received["p1"].events[-1][0] > task_end, WAIT_SECONDS, "more flood")
    client.stop_process(cid, "p1")

    ticks = [at for at, _ in received["p2"].events if at < task_end]
    token_gap = max(b - a for a, b in itertools.pairwise(tokens))
    tick_gap = max(b - a for a, b in itertools.pairwise(ticks))
    print(f"during the flood: largest gap between tokens {token_gap:.3f} s, ticks {tick_gap:.3f} s")
    assert len(tokens) > 10, tokens
    assert len(ticks) >= 10, ticks
    assert token_gap < 2.0 and tick_gap < 2.0


def test_a_trickle_is_gathered_rather_than_sent_write_by_write(
    client: Client, fake: FakeLLM, server: ServerProcess
) -> None:
    # Each line is a write of its own, stamped with when it was written.
    trickle = "python3 -uc 'import time\nfor i in range(60): print(time.time()); time.sleep(0.01)'"
    cid = start(client, fake, f"while [ ! -e go3 ]; do sleep 0.01; done; {trickle}")
    received = outputs_of(client, cid)
    (server.workspace / "go3").touch()
    wait_until(
        lambda: "p1" in received and received["p1"].text().count("\n") >= 60,
        WAIT_SECONDS,
        "the 60 lines",
    )
    stamps = [float(line) for line in received["p1"].text().split()]
    events = len(received["p1"].events)
    # The first at once, then at most one batch every BATCH_SECONDS, and the rest in the last.
    most = (stamps[-1] - stamps[0]) / BATCH_SECONDS + 3
    print(f"60 writes over {stamps[-1] - stamps[0]:.2f} s in {events} events (at most {most:.0f})")
    assert events <= most, events
