"""Relay floor: what relaying model deltas costs in two server shapes, without our agent core.

Run from the repo root: `python bench/relay_floor.py [--conversations 10,25,50] [--seconds 8]
[--rounds 2] [--shapes flask,ours,asgi]`. Exit code 1 when a goal is missed.

The fake model API, the in-order Socket.IO clients (workspace_client.connection: one reader
thread per connection, so the client is not what limits a fast stream) and every figure are
bench/pace.py's (100 deltas/s per conversation, each stamped with its send time). The server
is, per shape:

- `flask`: a bare relay on Flask-SocketIO in threading mode (our web server's stack): a thread
  per stream reads the `openai` client's response lines;
- `asgi`: the same relay on python-socketio's AsyncServer under uvicorn: one asyncio loop,
  `AsyncOpenAI`;
- `ours`: the real `main.py web` (threading), as bench/pace.py runs it.

A bare relay parses each SSE payload with `json` and emits `token {conversation_id, seq,
text}` to the conversation's room, then `done`: no history, no events of our core, no log.
So `ours` - `flask` is what our core adds per token, and `flask` vs `asgi` is what the server
shape costs. All servers are up at once; per N each runs `--rounds` times in turn, so the
load of a shared machine falls on each alike. The last table pools the rounds and gives the
goals against the bare Flask-SocketIO relay of the same run: server CPU per token <= 1.25x at
every N (a guard held, not pushed further); at N=50 latency p50 <= bare + 5 ms, p99 <= 1.5x
bare, send_message acknowledgement p50 <= 1.3x bare.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.pace import TOKEN, Served, relay_run, warm_up
from bench.pace_fake import FakeProcess
from bench.pace_figures import Run, percentile, verdict
from tests.kit.server import ServerProcess

SHAPES = ("flask", "asgi", "ours")
START_TIMEOUT = 30.0
GOAL_AT = 50  # the conversation count the latency and ack goals are set for
GOAL_CPU_RATIO = 1.25  # ours / bare, server CPU per token, at every N: a guard, not a target
GOAL_P50_EXTRA_MS = 5.0  # ours' p50 latency over the bare relay's
GOAL_P99_RATIO = 1.5
GOAL_ACK_RATIO = 1.3  # ours / bare, send_message acknowledgement p50


@dataclass(frozen=True)
class Upstream:
    """Where the relay reads its model stream."""

    base_url: str
    api_key: str
    model: str

    def request(self, text: str) -> dict[str, Any]:
        return {
            "model": self.model,
            "messages": [{"role": "user", "content": text}],
            "stream": True,
        }


def _contents(data: str) -> list[str]:
    chunk = json.loads(data)
    return [
        content
        for choice in chunk.get("choices") or []
        if (content := (choice.get("delta") or {}).get("content"))
    ]


def serve_flask(port: int, upstream: Upstream) -> None:
    import logging

    import openai
    from flask import Flask
    from flask_socketio import SocketIO, join_room

    app = Flask(__name__)
    sio = SocketIO(app, async_mode="threading")
    client = openai.OpenAI(api_key=upstream.api_key, base_url=upstream.base_url, max_retries=0)

    def relay(cid: str, text: str) -> None:
        seq = 0
        create = client.chat.completions.with_streaming_response.create
        with create(**upstream.request(text)) as response:
            for line in response.iter_lines():
                if not line.startswith("data:") or line[5:].strip() == "[DONE]":
                    continue
                for content in _contents(line[5:]):
                    seq += 1
                    sio.emit("token", {"conversation_id": cid, "seq": seq, "text": content}, to=cid)
        sio.emit("done", {"conversation_id": cid, "seq": seq + 1, "reason": "complete"}, to=cid)

    @sio.on("connect")
    def connect(auth: Any) -> bool:
        return isinstance(auth, dict) and auth.get("token") == TOKEN

    @sio.on("send_message")
    def send_message(data: dict[str, Any]) -> dict[str, Any]:
        cid = uuid.uuid4().hex
        join_room(cid)
        sio.start_background_task(relay, cid, str(data.get("text")))
        return {"ok": True, "conversation_id": cid}

    # A client's close frame, read after its websocket ended, is a "bad request" to werkzeug.
    logging.getLogger("werkzeug").setLevel(logging.CRITICAL)
    sio.run(app, host="127.0.0.1", port=port, allow_unsafe_werkzeug=True, log_output=False)


def serve_asgi(port: int, upstream: Upstream) -> None:
    import openai
    import socketio
    import uvicorn

    sio = socketio.AsyncServer(async_mode="asgi")
    client = openai.AsyncOpenAI(api_key=upstream.api_key, base_url=upstream.base_url, max_retries=0)

    async def relay(cid: str, text: str) -> None:
        seq = 0
        create = client.chat.completions.with_streaming_response.create
        async with create(**upstream.request(text)) as response:
            async for line in response.iter_lines():
                if not line.startswith("data:") or line[5:].strip() == "[DONE]":
                    continue
                for content in _contents(line[5:]):
                    seq += 1
                    payload = {"conversation_id": cid, "seq": seq, "text": content}
                    await sio.emit("token", payload, to=cid)
        done = {"conversation_id": cid, "seq": seq + 1, "reason": "complete"}
        await sio.emit("done", done, to=cid)

    @sio.event
    async def connect(sid: str, environ: dict[str, Any], auth: Any) -> bool:
        return isinstance(auth, dict) and auth.get("token") == TOKEN

    @sio.on("send_message")
    async def send_message(sid: str, data: dict[str, Any]) -> dict[str, Any]:
        cid = uuid.uuid4().hex
        await sio.enter_room(sid, cid)
        sio.start_background_task(relay, cid, str(data.get("text")))
        return {"ok": True, "conversation_id": cid}

    app = socketio.ASGIApp(sio)
    uvicorn.run(app, host="127.0.0.1", port=port, ws="wsproto", log_level="warning")


@dataclass
class Relay:
    """A bare relay in a process of its own."""

    url: str
    process: subprocess.Popen[bytes]

    @classmethod
    def start(cls, shape: str, fake: FakeProcess) -> Relay:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        argv = [
            sys.executable,
            __file__,
            "--serve",
            shape,
            "--port",
            str(port),
            "--upstream",
            f"{fake.base_url} {fake.api_key} {fake.model}",
        ]
        relay = cls(f"http://127.0.0.1:{port}", subprocess.Popen(argv))
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
                return relay
            time.sleep(0.1)
        relay.stop()
        raise RuntimeError(f"the {shape} relay did not start")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@contextlib.contextmanager
def started(shape: str, fake: FakeProcess, tmp: Path) -> Iterator[tuple[Served, int]]:
    """The server of `shape` on the fake, and the pid whose CPU is measured."""
    if shape == "ours":
        server = ServerProcess(
            tmp / "ws", tmp / "data", base_url=fake.base_url, api_key=fake.api_key
        ).start(START_TIMEOUT)
        try:
            assert server._process is not None  # its pid is what /proc is read for
            yield server, server._process.pid
        finally:
            server.stop()
        return
    relay = Relay.start(shape, fake)
    try:
        yield relay, relay.process.pid
    finally:
        relay.stop()


def pooled(runs: list[Run]) -> Run:
    """The rounds of one shape and N as one run: sums, and every latency and ack together."""
    first = runs[0]
    run = Run(first.label, first.conversations, sum(r.expected for r in runs))
    for part in runs:
        run.received += part.received
        run.gaps += part.gaps
        run.unfinished += part.unfinished
        run.bad += part.bad
        run.latencies_ms += part.latencies_ms
        run.ack_ms += part.ack_ms
        run.seconds += part.seconds
        run.server_cpu = (run.server_cpu or 0.0) + (part.server_cpu or 0.0)
        run.server_sys += part.server_sys
        run.fake_cpu += part.fake_cpu
        run.bench_cpu += part.bench_cpu
    return run


def print_round(run: Run, round_number: int) -> None:
    lat = run.latencies_ms
    pace = run.received / run.conversations / run.seconds if run.seconds else 0.0
    print(
        f"{run.label:<6}{run.conversations:>4}{round_number:>6}{run.received:>8}{pace:>8.1f}"
        f"{percentile(lat, 50):>9.2f}{percentile(lat, 99):>9.2f}"
        f"{run.cpu_us_per_token(run.server_cpu):>8.0f}{run.cpu_us_per_token(run.server_sys):>8.0f}"
        f"{percentile(run.ack_ms, 50):>8.0f}"
        f"{run.lost:>6}",
        flush=True,
    )


def measure(
    shapes: list[str], counts: list[int], seconds: float, rate: float, connections: int, rounds: int
) -> dict[str, dict[int, Run]]:
    """Every shape's server up at once on one fake; per N, `rounds` runs of each in turn (the
    order flipped every round), so a shared machine's load falls on all shapes alike."""
    deltas = max(1, round(seconds * rate))
    timeout = seconds * 3 + 30
    runs: dict[str, dict[int, list[Run]]] = {shape: {n: [] for n in counts} for shape in shapes}
    fake = FakeProcess.start(deltas, rate)
    try:
        with (
            tempfile.TemporaryDirectory(prefix="relay-floor-") as tmp,
            contextlib.ExitStack() as up,
        ):
            servers = {
                shape: up.enter_context(started(shape, fake, Path(tmp) / shape)) for shape in shapes
            }
            for server, _ in servers.values():
                warm_up(server)
            print(
                f"{rate:g} deltas/s per conversation, {deltas} deltas each, {connections} "
                f"connections, {rounds} rounds; servers: "
                + ", ".join(f"{shape} pid {pid}" for shape, (_, pid) in servers.items())
            )
            print(
                f"{'shape':<6}{'N':>4}{'round':>6}{'tokens':>8}{'/s/conv':>8}{'p50 ms':>9}"
                f"{'p99 ms':>9}{'us/tok':>8}{'kernel':>8}{'ack ms':>8}{'lost':>6}"
            )
            for n in counts:
                for number in range(1, rounds + 1):
                    for shape in shapes if number % 2 else shapes[::-1]:
                        server, pid = servers[shape]
                        run = relay_run(server, pid, fake, n, deltas, connections, timeout, shape)
                        print_round(run, number)
                        runs[shape][n].append(run)
    finally:
        fake.stop()
    return {shape: {n: pooled(rs) for n, rs in by_n.items()} for shape, by_n in runs.items()}


def compare(ours: dict[int, Run], bare: dict[int, Run]) -> bool:
    """The issue's goals, ours against the bare Flask-SocketIO relay of the same run."""
    ok = True

    def goal(text: str, met: bool) -> None:
        nonlocal ok
        ok = ok and met
        print(f"  {text} -> {verdict(met)}")

    print("\nours against the bare Flask-SocketIO relay (rounds pooled):")
    for n in sorted(ours.keys() & bare.keys()):
        mine, floor = ours[n], bare[n]
        cpu = mine.cpu_us_per_token(mine.server_cpu) / floor.cpu_us_per_token(floor.server_cpu)
        goal(
            f"N={n}: server CPU per token {cpu:.2f}x <= {GOAL_CPU_RATIO:g}x", cpu <= GOAL_CPU_RATIO
        )
        goal(f"N={n}: lost ours {mine.lost}, bare {floor.lost}", mine.lost == 0)
    if GOAL_AT in ours and GOAL_AT in bare:
        mine, floor = ours[GOAL_AT], bare[GOAL_AT]
        p50 = [percentile(run.latencies_ms, 50) for run in (mine, floor)]
        p99 = [percentile(run.latencies_ms, 99) for run in (mine, floor)]
        ack = [percentile(run.ack_ms, 50) for run in (mine, floor)]
        goal(
            f"N={GOAL_AT}: latency p50 {p50[0]:.1f} ms <= bare {p50[1]:.1f} + "
            f"{GOAL_P50_EXTRA_MS:g}",
            p50[0] <= p50[1] + GOAL_P50_EXTRA_MS,
        )
        goal(
            f"N={GOAL_AT}: latency p99 {p99[0]:.1f} ms <= {GOAL_P99_RATIO:g} x bare {p99[1]:.1f}",
            p99[0] <= GOAL_P99_RATIO * p99[1],
        )
        goal(
            f"N={GOAL_AT}: send_message ack p50 {ack[0]:.0f} ms = {ack[0] / ack[1]:.2f}x bare "
            f"{ack[1]:.0f} ms <= {GOAL_ACK_RATIO:g}x",
            ack[0] <= GOAL_ACK_RATIO * ack[1],
        )
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--conversations", default="10,25,50", help="comma-separated counts")
    parser.add_argument("--seconds", type=float, default=8.0, help="streaming time per run")
    parser.add_argument("--rate", type=float, default=100.0, help="deltas/s per conversation")
    parser.add_argument("--connections", type=int, default=10, help="Socket.IO connections")
    parser.add_argument("--rounds", type=int, default=2, help="runs of each shape per N")
    parser.add_argument("--shapes", default="flask,ours", help="of: " + ", ".join(SHAPES))
    parser.add_argument("--serve", choices=SHAPES[:2], help=argparse.SUPPRESS)  # internal
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--upstream", help=argparse.SUPPRESS)  # "BASE_URL KEY MODEL"
    args = parser.parse_args()
    if args.serve:
        upstream = Upstream(*args.upstream.split())
        (serve_flask if args.serve == "flask" else serve_asgi)(args.port, upstream)
        return 0
    counts = [int(c) for c in args.conversations.split(",") if c.strip()]
    shapes = [s.strip() for s in args.shapes.split(",") if s.strip()]
    runs = measure(shapes, counts, args.seconds, args.rate, args.connections, args.rounds)
    if "ours" in runs and "flask" in runs:
        return 0 if compare(runs["ours"], runs["flask"]) else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
