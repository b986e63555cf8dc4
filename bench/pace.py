"""Pace benchmark: N conversations at 100 deltas/s each, added latency and server CPU per token.

Run from the repo root:
`python bench/pace.py [--conversations 10,25,50,100] [--seconds 10]
[--async-mode threading|eventlet|both] [--py-spy DIR]`.

The fake model API (bench/pace_fake.py, a process of its own) streams every conversation's
reply one delta every `1/--rate` seconds; each delta's text is its send time
(`Reply(stamp=True)`: `time.time_ns()` and a `;`). A real `main.py web` process relays them
as `token` events to in-order Socket.IO clients spread over `--connections` connections,
which note each event's arrival time on the same clock. Per N we print:

- added latency (arrival - send) p50 / p99 / max over every delta;
- deltas lost (sent but never received) and seq gaps (per conversation, over every event);
- server CPU per token: utime+stime of the server process and its children (`/proc/PID/stat`,
  clock ticks), delta over the run, divided by the tokens relayed;
- the baseline of the same run: the same N read straight from the fake by raw HTTP readers
  (httpx, one `json.loads` per line, in this process) at the same pace: its latency and
  the CPU per token of the fake and of the readers, so a noisy machine shows.

Goals: <= 100 us of server CPU per token at every N; at N=50, p50 <= 5 ms, p99 <= 50 ms and
nothing lost, in both async modes. Exit code 1 when a goal is missed. bench/read_floor.py
prints what reading the streams alone costs, and bench/relay_floor.py a bare relay.

`--py-spy DIR` records the server with py-spy (`py-spy record --gil -f raw`: GIL holders) during
each run into DIR/<mode>-<N>.txt and prints the top functions and where the samples go.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Protocol

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx

from bench.pace_fake import FakeProcess
from bench.pace_figures import (
    GOAL_AT,
    GOAL_CPU_US,
    GOAL_P50_MS,
    GOAL_P99_MS,
    HEADER,
    UNITS,
    Run,
    Stamps,
    cpu_seconds,
    cpu_times,
    own_cpu,
    print_run,
    verdict,
)
from bench.pace_profile import start_py_spy, summarise_py_spy
from tests.kit.server import ServerProcess
from tests.kit.settings import TOKEN
from workspace_client.connection import Connection

START_TIMEOUT = 30.0


# --- baseline: raw readers straight from the fake ---------------------------------------------


def raw_run(fake: FakeProcess, conversations: int, deltas: int, timeout: float) -> Run:
    """`conversations` raw HTTP streams at once, read in threads of this process."""
    run = Run("raw", conversations, conversations * deltas)
    results: list[Stamps] = [Stamps() for _ in range(conversations)]
    barrier = threading.Barrier(conversations + 1)
    body = {
        "model": fake.model,
        "messages": [{"role": "user", "content": "pace raw"}],
        "stream": True,
        "thinking": {"type": "disabled"},
    }
    headers = {"Authorization": f"Bearer {fake.api_key}"}

    def read(stamps: Stamps) -> None:
        with httpx.Client(timeout=timeout) as client:
            barrier.wait(timeout)
            url = f"{fake.base_url}/chat/completions"
            with client.stream("POST", url, json=body, headers=headers) as response:
                for line in response.iter_lines():
                    if not line.startswith("data:") or line == "data: [DONE]":
                        continue
                    arrived = time.time_ns()
                    chunk = json.loads(line[5:])
                    for choice in chunk.get("choices") or []:
                        content = (choice.get("delta") or {}).get("content")
                        if content:
                            stamps.feed(content, arrived)

    threads = [threading.Thread(target=read, args=(s,), daemon=True) for s in results]
    for thread in threads:
        thread.start()
    barrier.wait(timeout)
    cpu0, fake0, started = own_cpu(), cpu_seconds(fake.pid), time.monotonic()
    deadline = started + timeout
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    run.seconds = time.monotonic() - started
    run.bench_cpu = own_cpu() - cpu0
    run.fake_cpu = cpu_seconds(fake.pid) - fake0
    run.unfinished = sum(thread.is_alive() for thread in threads)
    for stamps in results:
        run.received += len(stamps.latencies_ms)
        run.latencies_ms += stamps.latencies_ms
        run.bad += stamps.bad
    return run


# --- through the server ----------------------------------------------------------------------


class Recorder:
    """An in-order Socket.IO client noting every event with its arrival time (ns)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.connection: Connection | None = None
        self.rows: list[tuple[int, str, Any]] = []
        self.expected_done = 0
        self.done = 0
        self.finished = threading.Event()

    def _record(self, name: str, payload: Any = None) -> None:
        self.rows.append((time.time_ns(), name, payload))
        if name == "done":
            self.done += 1
            if self.done >= self.expected_done:
                self.finished.set()

    def connect(self) -> Recorder:
        self.connection = Connection(self.url, auth={"token": TOKEN}, on_event=self._record)
        return self

    def start(self, text: str) -> str:
        assert self.connection is not None
        ack = self.connection.call("send_message", {"text": text}, timeout=10)
        assert ack and ack.get("ok"), ack
        return str(ack["conversation_id"])

    def reset(self, expected_done: int) -> None:
        self.rows = []
        self.done = 0
        self.expected_done = expected_done
        self.finished.clear()

    def disconnect(self) -> None:
        if self.connection is not None:
            self.connection.close()


class Served(Protocol):
    """A server the clients connect to: `main.py web`, or bench/relay_floor.py's bare relays."""

    @property
    def url(self) -> str: ...


def warm_up(server: Served) -> None:
    """One short task first: imports, the model client and the connections are made."""
    warm = Recorder(server.url).connect()
    warm.reset(1)
    warm.start("warm up")
    warm.finished.wait(20)
    warm.disconnect()


def relay_run(
    server: Served,
    pid: int,
    fake: FakeProcess,
    conversations: int,
    deltas: int,
    connections: int,
    timeout: float,
    label: str,
) -> Run:
    """`conversations` tasks started at once through the server, over `connections` clients."""
    run = Run(label, conversations, conversations * deltas)
    clients = [Recorder(server.url).connect() for _ in range(min(connections, conversations))]
    try:
        for i, client in enumerate(clients):
            client.reset(len(range(i, conversations, len(clients))))
        (user0, sys0), bench0, fake0 = cpu_times(pid), own_cpu(), cpu_seconds(fake.pid)
        started = time.monotonic()
        owners: dict[str, Recorder] = {}

        def start(n: int) -> None:  # all at once: one after another would stagger them
            client, asked = clients[n % len(clients)], time.monotonic()
            owners[client.start(f"pace {label} {n}")] = client
            run.ack_ms.append((time.monotonic() - asked) * 1000)

        starters = [threading.Thread(target=start, args=(n,)) for n in range(conversations)]
        for starter in starters:
            starter.start()
        for starter in starters:
            starter.join(timeout)
        deadline = started + timeout
        for client in clients:
            client.finished.wait(max(0.0, deadline - time.monotonic()))
        run.seconds = time.monotonic() - started
        user1, sys1 = cpu_times(pid)
        run.server_cpu, run.server_sys = user1 + sys1 - user0 - sys0, sys1 - sys0
        run.bench_cpu = own_cpu() - bench0
        run.fake_cpu = cpu_seconds(fake.pid) - fake0
    finally:
        for client in clients:
            client.disconnect()
    per_conversation: dict[str, list[tuple[int, str, Any]]] = defaultdict(list)
    for client in clients:
        for row in list(client.rows):
            payload = row[2]
            if isinstance(payload, dict) and payload.get("conversation_id") in owners:
                per_conversation[payload["conversation_id"]].append(row)
    first_tokens = []
    for cid in owners:
        rows = per_conversation.get(cid, [])
        first = next((arrived for arrived, name, _ in rows if name == "token"), None)
        if first is not None:
            first_tokens.append(first)
        stamps = Stamps()
        for arrived, name, payload in rows:
            if name == "token":
                stamps.feed(payload.get("text", ""), arrived)
        run.received += len(stamps.latencies_ms)
        run.latencies_ms += stamps.latencies_ms
        run.bad += stamps.bad
        run.unfinished += not any(name == "done" for _, name, _ in rows)
        seqs = [p["seq"] for _, _, p in rows if "seq" in p]
        run.gaps += (not seqs or seqs[0] != 1) + sum(
            1 for a, b in itertools.pairwise(seqs) if b != a + 1
        )
    run.start_spread_s = (max(first_tokens) - min(first_tokens)) / 1e9 if first_tokens else 0.0
    return run


# --- driver ----------------------------------------------------------------------------------


def run_mode(
    mode: str,
    counts: list[int],
    seconds: float,
    rate: float,
    connections: int,
    py_spy: Path | None,
    baseline: bool,
) -> bool:
    deltas = max(1, round(seconds * rate))
    timeout = seconds * 3 + 30
    ok = True
    fake = FakeProcess.start(deltas, rate)
    with contextlib.ExitStack() as stack:
        stack.callback(fake.stop)
        tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="pace-"))
        server = ServerProcess.in_folder(Path(tmp), fake, async_mode=mode).start(START_TIMEOUT)
        try:
            process = server._process  # the server's Popen: its pid is what /proc is read for
            assert process is not None
            warm_up(server)
            print(
                f"\nasync mode {mode}: {rate:g} deltas/s per conversation, {deltas} deltas "
                f"each, {connections} connections; server pid {process.pid}, fake pid "
                f"{fake.pid}",
                flush=True,
            )
            print(HEADER)
            print(UNITS)
            for n in counts:
                base = raw_run(fake, n, deltas, timeout) if baseline else None
                if base is not None:
                    print_run(base)
                spy = None
                if py_spy is not None:
                    py_spy.mkdir(parents=True, exist_ok=True)
                    spy = start_py_spy(process.pid, py_spy / f"{mode}-{n}.txt", seconds)
                run = relay_run(server, process.pid, fake, n, deltas, connections, timeout, mode)
                ok = print_run(run) and ok
                if py_spy is not None and spy is not None:
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        spy.wait(seconds + 30)
                    if spy.poll() is None:
                        spy.kill()
                        spy.wait()
                    out = py_spy / f"{mode}-{n}.txt"
                    if out.exists():
                        summarise_py_spy(out)
                sys.stdout.flush()
        finally:
            server.stop()
    return ok


def main() -> int:
    """Entry point; exit code 1 when a goal was missed."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--conversations", default="10,25,50,100", help="comma-separated conversation counts"
    )
    parser.add_argument("--seconds", type=float, default=10.0, help="streaming time per run")
    parser.add_argument("--rate", type=float, default=100.0, help="deltas/s per conversation")
    parser.add_argument("--connections", type=int, default=10, help="Socket.IO connections")
    parser.add_argument("--async-mode", choices=["threading", "eventlet", "both"], default="both")
    parser.add_argument("--no-baseline", action="store_true", help="skip the raw readers")
    parser.add_argument("--py-spy", type=Path, help="record the server into this folder")
    parser.add_argument(
        "--summarise", type=Path, nargs="*", help="only print the summary of these py-spy raw files"
    )
    args = parser.parse_args()
    if args.summarise:
        for path in args.summarise:
            summarise_py_spy(path)
        return 0
    counts = [int(c) for c in args.conversations.split(",") if c.strip()]
    modes = ["threading", "eventlet"] if args.async_mode == "both" else [args.async_mode]
    print(
        f"goals: server CPU <= {GOAL_CPU_US:.0f} us/token at every N; at N={GOAL_AT}: "
        f"p50 <= {GOAL_P50_MS} ms, p99 <= {GOAL_P99_MS} ms, 0 lost, 0 seq gaps. "
        f"{os.cpu_count()} CPUs."
    )
    print(
        "latency = client arrival - fake send (one clock). CPU per token relayed, from "
        "/proc: server = main.py web and children; fake = the fake model process; x fake = "
        "server / fake; client = this process (Socket.IO clients, or raw httpx readers on "
        "the 'raw' lines); machine busy = all three / wall time / CPUs"
    )
    ok = True
    for mode in modes:
        ok = (
            run_mode(
                mode,
                counts,
                args.seconds,
                args.rate,
                args.connections,
                args.py_spy,
                not args.no_baseline,
            )
            and ok
        )
    print(f"\noverall: {verdict(ok)}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
