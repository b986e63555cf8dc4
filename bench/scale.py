"""Scale-out benchmark: one web process vs two coordinated through Redis, both behind haproxy.

Run from the repo root (needs redis-server and haproxy: `make system-test-deps`):
`python bench/scale.py [--conversations 40] [--deltas 300] [--rate 100] [--clients 10]`.

The same load runs through haproxy (deploy/haproxy.cfg, sticky sessions) in front of
1. one `main.py web` process, no Redis (today's single process), then
2. two processes sharing a data dir and a throwaway redis-server (AGENT_REDIS_URL).
`--conversations` tasks start at once, spread over `--clients` Socket.IO connections (round
robin: half of them on each process); each conversation also has a watcher joined through
another connection, so with two processes half the events cross Redis. The fake model streams
`--deltas` deltas per task at `--rate` per second, each stamped with its send time. Printed
side by side: aggregate events/s, latency from the model's send to the client (p50/p99) and
events lost (per-conversation seq gaps and missing tokens; the goal is 0).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.pace_figures import Stamps, percentile
from tests.fake_llm import FakeLLM, Reply, Response
from tests.kit.clients import EventClient, StockSocketIOClient
from tests.kit.cluster import Haproxy, RedisServer, cluster, missing_programs
from tests.kit.events import Received
from tests.kit.server import ServerProcess


@dataclass
class Result:
    label: str
    events: int
    seconds: float
    latencies_ms: list[float]
    lost: int

    def row(self) -> list[str]:
        return [
            self.label,
            f"{self.events / self.seconds:.0f}",
            f"{percentile(self.latencies_ms, 50):.1f}",
            f"{percentile(self.latencies_ms, 99):.1f}",
            str(self.lost),
        ]


@contextlib.contextmanager
def single(root: Path, fake: FakeLLM, async_mode: str) -> Iterator[list[int]]:
    server = ServerProcess(
        root / "ws",
        root / "data",
        base_url=fake.base_url,
        api_key=fake.api_key,
        async_mode=async_mode,
    )
    with server:
        yield [server.port]


@contextlib.contextmanager
def pair(root: Path, fake: FakeLLM, async_mode: str) -> Iterator[list[int]]:
    with (
        RedisServer(root / "redis") as redis,
        cluster(
            root,
            redis.url(),
            base_url=fake.base_url,
            api_key=fake.api_key,
            async_mode=async_mode,
        ) as servers,
    ):
        yield [server.port for server in servers]


def load(url: str, fake: FakeLLM, label: str, args: argparse.Namespace) -> Result:
    """Start every conversation at once; wait for all; measure what the watchers received."""
    fake.responder = lambda _request: _reply(args)
    clients = [  # polling, then the upgrade through the balancer's sticky cookie, as a page
        StockSocketIOClient(url, transports=["polling", "websocket"]).connect()
        for _ in range(args.clients)
    ]
    try:
        started = time.monotonic()
        watched: dict[str, StockSocketIOClient] = {}
        for n in range(args.conversations):
            owner, watcher = clients[n % len(clients)], clients[(n + 1) % len(clients)]
            cid = owner.start(f"scale {n}")
            assert watcher.call("join", {"conversation_id": cid, "after_seq": 0})["ok"]
            watched[cid] = watcher
        results = {cid: watcher.wait_done(cid, timeout=600) for cid, watcher in watched.items()}
        seconds = max(events[-1].at for events in results.values()) - started
    finally:
        for client in clients:
            client.disconnect()
    latencies: list[float] = []
    lost = 0
    for events in results.values():
        stamps = Stamps()
        offset_ns = time.time_ns() - time.monotonic_ns()  # `at` is monotonic
        for event in events:
            if event.name == "token":
                stamps.feed(event.payload["text"], int(event.at * 1e9) + offset_ns)
        latencies += stamps.latencies_ms
        lost += _gaps(events) + args.deltas - len(stamps.latencies_ms) + stamps.bad
    return Result(label, sum(len(events) for events in results.values()), seconds, latencies, lost)


def _reply(args: argparse.Namespace) -> Response:
    return Reply(content="x" * args.deltas, chunk_size=1, delay=1 / args.rate, stamp=True)


def _gaps(events: list[Received]) -> int:
    seqs = [e.payload["seq"] for e in events]
    return sum(1 for a, b in itertools.pairwise(seqs) if b != a + 1) + (seqs[0] != 1)


def run(args: argparse.Namespace) -> bool:
    results = []
    with FakeLLM("deepseek") as fake:
        fake.responder = lambda _request: Reply(content="warm")
        for label, topology in (("1 process", single), ("2 processes + Redis", pair)):
            with (
                tempfile.TemporaryDirectory(prefix="scale-") as tmp,
                topology(Path(tmp), fake, args.async_mode) as ports,
                Haproxy(Path(tmp) / "haproxy", ports) as balancer,
            ):
                warm = EventClient(balancer.url).connect()
                warm.wait_done(warm.start("warm up"))
                warm.disconnect()
                results.append(load(balancer.url, fake, label, args))
    header = ["through haproxy", "events/s", "p50 ms", "p99 ms", "lost"]
    print(
        f"{args.conversations} conversations x {args.deltas} deltas at {args.rate}/s, "
        f"{args.clients} connections, {args.async_mode} mode; latency: model send -> client"
    )
    rows = [header, *(result.row() for result in results)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)))
    lost = sum(result.lost for result in results)
    print(f"events lost: {lost}   {'PASS' if lost == 0 else 'FAIL'}")
    return lost == 0


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--conversations", type=int, default=40)
    parser.add_argument("--deltas", type=int, default=300, help="deltas each task streams")
    parser.add_argument("--rate", type=float, default=100, help="deltas per second per task")
    parser.add_argument("--clients", type=int, default=10)
    parser.add_argument("--async-mode", choices=["threading", "eventlet"], default="threading")
    args = parser.parse_args()
    reason = missing_programs()
    if reason is not None:
        print(f"cannot run: {reason}", file=sys.stderr)
        return 2
    return 0 if run(args) else 1


if __name__ == "__main__":
    sys.exit(main())
