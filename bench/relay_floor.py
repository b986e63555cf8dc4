"""Relay floor: what relaying model deltas costs in two server shapes, without our agent core.

Run from the repo root: `python bench/relay_floor.py [--conversations 10,25,50] [--seconds 8]
[--shapes flask,asgi,ours]`.

The fake model API, the in-order Socket.IO clients and every figure are bench/pace.py's (100
deltas/s per conversation, each stamped with its send time). The server is, per shape:

- `flask`: a bare relay on Flask-SocketIO in threading mode (our web server's stack): a thread
  per stream reads the `openai` client's response lines;
- `asgi`: the same relay on python-socketio's AsyncServer under uvicorn: one asyncio loop,
  `AsyncOpenAI`;
- `ours`: the real `main.py web` (threading), as bench/pace.py runs it.

A bare relay parses each SSE payload with `json` and emits `token {conversation_id, seq,
text}` to the conversation's room, then `done`: no history, no events of our core, no log.
So `ours` - `flask` is what our core adds per token, and `flask` vs `asgi` is what the server
shape costs. With both `flask` and `ours`, a last table gives ours / flask per N against
GOAL_RATIO (issue 14's goal 1 as restated against this floor), with the pace each kept and
the median send_message ack of each (what a user waits for before their task starts).
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
from bench.pace_figures import HEADER, UNITS, Run, percentile, print_run, verdict
from tests.web_helpers import ServerProcess

SHAPES = ("flask", "asgi", "ours")
START_TIMEOUT = 30.0
GOAL_RATIO = 1.25  # ours / the bare Flask-SocketIO relay: goal 1 as the issue 14 note restates it


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


def run_shape(
    shape: str, counts: list[int], seconds: float, rate: float, connections: int
) -> dict[int, Run]:
    """One run per conversation count through the server of `shape`, printed as they end."""
    deltas = max(1, round(seconds * rate))
    timeout = seconds * 3 + 30
    runs: dict[int, Run] = {}
    fake = FakeProcess.start(deltas, rate)
    try:
        with (
            tempfile.TemporaryDirectory(prefix="relay-floor-") as tmp,
            started(shape, fake, Path(tmp)) as (server, pid),
        ):
            warm_up(server)
            what = "main.py web, threading" if shape == "ours" else f"bare relay, {shape}"
            print(
                f"\n{what}: {rate:g} deltas/s per conversation, {deltas} deltas each, "
                f"{connections} connections; server pid {pid}",
                flush=True,
            )
            print(HEADER)
            print(UNITS)
            for n in counts:
                runs[n] = relay_run(server, pid, fake, n, deltas, connections, timeout, shape)
                print_run(runs[n])
                sys.stdout.flush()
    finally:
        fake.stop()
    return runs


def compare(ours: dict[int, Run], bare: dict[int, Run]) -> None:
    """Ours against the bare Flask-SocketIO relay of the same run, per conversation count."""
    print(f"\nours / bare flask relay, server CPU per token (goal <= {GOAL_RATIO:g}x):")
    for n in sorted(ours.keys() & bare.keys()):
        mine, floor = ours[n], bare[n]
        ratio = mine.cpu_us_per_token(mine.server_cpu) / floor.cpu_us_per_token(floor.server_cpu)
        pace = [run.received / n / run.seconds if run.seconds else 0.0 for run in (mine, floor)]
        acks = [percentile(run.ack_ms, 50) for run in (mine, floor)]
        print(
            f"  N={n:<4} {ratio:.2f}x {verdict(ratio <= GOAL_RATIO)}; deltas/s per conversation: "
            f"ours {pace[0]:.0f}, bare {pace[1]:.0f}; send_message ack p50: ours {acks[0]:.0f} "
            f"ms, bare {acks[1]:.0f} ms; lost: ours {mine.lost}, bare {floor.lost}"
        )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--conversations", default="10,25,50", help="comma-separated counts")
    parser.add_argument("--seconds", type=float, default=8.0, help="streaming time per run")
    parser.add_argument("--rate", type=float, default=100.0, help="deltas/s per conversation")
    parser.add_argument("--connections", type=int, default=10, help="Socket.IO connections")
    parser.add_argument("--shapes", default=",".join(SHAPES), help="of: " + ", ".join(SHAPES))
    parser.add_argument("--serve", choices=SHAPES[:2], help=argparse.SUPPRESS)  # internal
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--upstream", help=argparse.SUPPRESS)  # "BASE_URL KEY MODEL"
    args = parser.parse_args()
    if args.serve:
        upstream = Upstream(*args.upstream.split())
        (serve_flask if args.serve == "flask" else serve_asgi)(args.port, upstream)
        return 0
    counts = [int(c) for c in args.conversations.split(",") if c.strip()]
    runs = {
        shape: run_shape(shape, counts, args.seconds, args.rate, args.connections)
        for shape in [s.strip() for s in args.shapes.split(",") if s.strip()]
    }
    if "ours" in runs and "flask" in runs:
        compare(runs["ours"], runs["flask"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
