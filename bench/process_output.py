"""Process output: a background process printing 50 MB, the time until a client has all of it
through `process` events, against the same bytes through a bare relay. 50 MB take about half a
second: long enough that the rate, not the first and last milliseconds, is measured.

Run from the repo root: `python bench/process_output.py [--megabytes 50] [--rounds 5]`. Exit
code 1 when the goal is missed.

The process is the same script in both: it waits for a file `go` in its folder, then writes
the bytes to stdout in 64 KiB writes and ends. The client is workspace_client's connection
(tests.kit's EventClient: one reader thread, events handed over in wire order); it counts
the bytes of the process's output events (a delta's UTF-8 bytes, plus `skipped`). The time
runs from `go` to the last byte.

- `ours`: the real `main.py web` (threading, the local sandbox under bubblewrap) on the fake
  model: a task starts the script with run_command {background: true}; its output goes
  through the session's pump (a ring and a log file), core/process_relay.py's batches and
  the conversation's timeline to the room.
- `bare`, the floor: a Flask-SocketIO server in threading mode (our web server's stack) that
  runs the script as a plain child process (no sandbox) and emits each read of its pipe (at
  most 64 KiB, decoded) as a `process` event to the client's room: what relaying a process's
  output cannot do without (a pipe, a decode, JSON, Socket.IO), and nothing of ours.

Goal: bare time / ours >= 0.8 (the median of the rounds). Each line also gives the CPU the
server process used per MB (its own threads: not the process writing, nor the sandbox).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.fake_llm import FakeLLM
from tests.kit.clients import EventClient, connected
from tests.kit.model import calls_in_the_message, run_calls
from tests.kit.server import REPO, ServerProcess, free_port, listening

GOAL = 0.8
WAIT_SECONDS = 120.0
EMIT = """
import os, sys, time
size = int(sys.argv[1])
while not os.path.exists("go"):
    time.sleep(0.005)
line = (b"x" * 1023 + b"\\n") * 64
written = 0
while written < size:
    written += os.write(1, line[: size - written])
"""


class Counter:
    """Follows a process's output events as the client receives them: `done` once they
    reach the last byte; `skipped` counts the bytes that never came (the ring overran)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.end = 0
        self.skipped = 0
        self.done = threading.Event()
        self.finished_at = 0.0

    def take(self, payload: dict[str, Any]) -> None:
        if payload.get("phase") != "output":
            return
        self.skipped += payload.get("skipped") or 0
        self.end = payload["offset"] + len((payload.get("delta") or "").encode())
        if self.end >= self.size and not self.done.is_set():
            self.finished_at = time.perf_counter()
            self.done.set()

    def wait(self, started: float) -> tuple[float, int]:
        """Seconds from `started` to the last byte, and the bytes skipped."""
        if not self.done.wait(WAIT_SECONDS):
            raise RuntimeError(f"the output reached only {self.end} of {self.size} bytes")
        return self.finished_at - started, self.skipped


Measured = tuple[float, int, float]  # seconds, bytes skipped, server CPU seconds


def cpu_seconds(pid: int) -> float:
    """The CPU time process `pid` used so far (user and system)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def timed(folder: Path, counter: Counter, client: EventClient, pid: int) -> Measured:
    """Say `go`; the seconds until the client has the last byte, the bytes skipped, and the
    CPU seconds server `pid` used meanwhile."""
    client.on("process", counter.take)
    cpu = cpu_seconds(pid)
    started = time.perf_counter()
    (folder / "go").write_text("")
    seconds, skipped = counter.wait(started)
    return seconds, skipped, cpu_seconds(pid) - cpu


def ours(root: Path, size: int) -> Measured:
    workspace = root / "ws"
    workspace.mkdir(parents=True, exist_ok=True)
    (workspace / "emit.py").write_text(EMIT)
    (workspace / "go").unlink(missing_ok=True)
    with FakeLLM() as fake:
        fake.responder = calls_in_the_message
        env = {"AGENT_SANDBOX": "local", "AGENT_PROCESS_SETTLE_SECONDS": "0.2"}
        server = ServerProcess(workspace, root / "data", base_url=fake.base_url,
                               api_key=fake.api_key, env=env)  # fmt: skip
        with server, connected(server.url) as client:
            kind = client.call("get_status")["sandbox"]["kind"]
            if kind != "bubblewrap":
                raise SystemExit(f"bubblewrap is not usable here (the sandbox is {kind})")
            command = f"python3 emit.py {size}"
            _, cid = run_calls(client, [("run_command", {"command": command, "background": True})])
            assert client.call("join", {"conversation_id": cid, "after_seq": 0})["ok"]
            assert server.pid is not None
            return timed(workspace, Counter(size), client, server.pid)


def serve_bare(port: int, folder: str, size: int) -> None:
    import logging

    from flask import Flask
    from flask_socketio import SocketIO, join_room

    app = Flask(__name__)
    sio = SocketIO(app, async_mode="threading")

    def relay(room: str) -> None:
        child = subprocess.Popen([sys.executable, "-c", EMIT, str(size)], cwd=folder,
                                 stdout=subprocess.PIPE)  # fmt: skip
        assert child.stdout is not None
        offset = 0
        while data := os.read(child.stdout.fileno(), 65536):
            event = {"conversation_id": room, "process_id": "p1", "phase": "output",
                     "delta": data.decode(errors="replace"), "offset": offset}  # fmt: skip
            sio.emit("process", event, to=room)
            offset += len(data)
        child.wait()

    @sio.on("join")
    def join(data: dict[str, Any]) -> dict[str, Any]:
        join_room("c1")
        sio.start_background_task(relay, "c1")
        return {"ok": True}

    logging.getLogger("werkzeug").setLevel(logging.CRITICAL)
    sio.run(app, host="127.0.0.1", port=port, allow_unsafe_werkzeug=True, log_output=False)


def bare(root: Path, size: int) -> Measured:
    folder = root / "bare"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "go").unlink(missing_ok=True)
    port = free_port()
    argv = [sys.executable, __file__, "--serve-bare", str(port), str(folder), str(size)]
    with served(argv) as (pid, alive):
        if not listening(port, 30) or not alive():
            raise RuntimeError("the bare relay did not start")
        with connected(f"http://127.0.0.1:{port}") as client:
            assert client.call("join", {"conversation_id": "c1"})["ok"]
            time.sleep(0.2)  # for its child (started by the join) to wait for `go`
            return timed(folder, Counter(size), client, pid)


@contextlib.contextmanager
def served(argv: list[str]) -> Iterator[tuple[int, Callable[[], bool]]]:
    process = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.DEVNULL)
    try:
        yield process.pid, lambda: process.poll() is None
    finally:
        process.terminate()
        process.wait(10)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--megabytes", type=float, default=50.0)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--serve-bare", nargs=3, help=argparse.SUPPRESS)  # internal
    args = parser.parse_args()
    if args.serve_bare:
        port, folder, size = args.serve_bare
        serve_bare(int(port), folder, int(size))
        return 0
    size = int(args.megabytes * 1_000_000)
    times: dict[str, list[float]] = {"bare": [], "ours": []}
    skipped = 0
    with tempfile.TemporaryDirectory() as tmp:
        for number in range(1, args.rounds + 1):
            for name, measure in (("bare", bare), ("ours", ours)):
                seconds, lost, cpu = measure(Path(tmp) / f"{name}-{number}", size)
                times[name].append(seconds)
                skipped += lost
                rate, per_mb = size / seconds / 1e6, cpu / (size / 1e6) * 1000
                print(f"round {number} {name:<5} {seconds:7.3f} s  {rate:7.1f} MB/s  "
                      f"server CPU {per_mb:5.1f} ms/MB  skipped {lost} bytes",
                      flush=True)  # fmt: skip
    floor, ours_median = statistics.median(times["bare"]), statistics.median(times["ours"])
    ratio = floor / ours_median
    met = ratio >= GOAL and skipped == 0
    print(f"\n{args.megabytes:g} MB of process output to a client (median of {args.rounds}):")
    print(f"  bare relay {floor:.3f} s, ours {ours_median:.3f} s; bytes skipped: {skipped}")
    print(f"  bare / ours = {ratio:.2f} (goal >= {GOAL}, nothing skipped) -> "
          f"{'PASS' if met else 'FAIL'}")  # fmt: skip
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
