"""File-burst benchmark: another program creates and deletes 20,000 files while clients watch.

Run from the repo root: `python bench/file_burst.py [--files 20000] [--clients 2]
[--async-mode threading|eventlet] [--check]`.

A real `main.py web` process serves an empty workspace to `--clients` Socket.IO clients. A
child process writes `--files` files in folders of 100 under churn/, then deletes them all.
Printed: the `file_tree` messages and bytes (the payloads' JSON) each client received, how
many paths came more than once in one message, the 99th percentile of `get_status` ack time
during the burst against the same run's idle one (a ratio, so a loaded machine does not
change the verdict), and the server's RSS kept once the burst is over.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.fake_llm import FakeLLM
from tests.kit.clients import EventClient, ack_latency
from tests.kit.server import ServerProcess

MAX_BYTES_PER_CLIENT = 200_000
MAX_P99_RATIO = 10.0
MAX_RSS_KEPT_MB = 20.0
QUIET_SECONDS = 2.0  # no file_tree event for this long: the burst is over
PROBE_EVERY = 0.02

BURST = """
import os, sys
root, files = sys.argv[1], int(sys.argv[2])
for n in range(files):
    folder = os.path.join(root, "churn", f"d{n // 100:03d}")
    if n % 100 == 0:
        os.makedirs(folder)
    with open(os.path.join(folder, f"f{n:05d}.txt"), "w") as file:
        file.write("x")
for n in range(files):
    os.remove(os.path.join(root, "churn", f"d{n // 100:03d}", f"f{n:05d}.txt"))
    if n % 100 == 99:
        os.rmdir(os.path.join(root, "churn", f"d{n // 100:03d}"))
os.rmdir(os.path.join(root, "churn"))
"""


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def p99(samples: list[float]) -> float:
    return statistics.quantiles(samples, n=100)[98] if len(samples) > 1 else samples[0]


class Prober:
    """get_status acks timed every PROBE_EVERY seconds on a client of its own."""

    def __init__(self, url: str) -> None:
        self.client = EventClient(url).connect()
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append(ack_latency(self.client))
            time.sleep(PROBE_EVERY)

    def measure(self, seconds: float) -> list[float]:
        self.start()
        time.sleep(seconds)
        return self.stop()

    def start(self) -> None:
        self.samples = []
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def stop(self) -> list[float]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        return self.samples


def tree_messages(client: EventClient) -> list[dict[str, Any]]:
    return [e.payload for e in client.received() if e.name == "file_tree"]


def wait_quiet(clients: list[EventClient]) -> None:
    """Until no client got a file_tree event for QUIET_SECONDS."""
    while True:
        last = max(
            (e.at for c in clients for e in c.received() if e.name == "file_tree"), default=0
        )
        if last and time.monotonic() - last > QUIET_SECONDS:
            return
        time.sleep(0.2)


def repeated_paths(messages: list[dict[str, Any]]) -> int:
    """Paths named more than once within one message, summed over the messages."""
    total = 0
    for message in messages:
        counts = Counter(change["path"] for change in message.get("changes") or [])
        total += sum(n - 1 for n in counts.values() if n > 1)
    return total


@dataclass
class Burst:
    seconds: float
    idle: list[float]  # get_status ack times before the burst
    during: list[float]
    rss_before: float
    rss_after: float
    messages: list[list[dict[str, Any]]]  # each client's file_tree payloads


def burst(url: str, pid: int, workspace: Path, files: int, clients: int) -> Burst:
    """Measure idle, run the burst, wait until its events are over, measure again."""
    watchers = [EventClient(url).connect() for _ in range(clients)]
    prober = Prober(url)
    time.sleep(1.0)  # the watcher child starting
    idle = prober.measure(3.0)
    rss_before = rss_mb(pid)
    prober.start()
    started = time.monotonic()
    subprocess.run([sys.executable, "-c", BURST, str(workspace), str(files)], check=True)
    wait_quiet(watchers)
    seconds = time.monotonic() - started
    during = prober.stop()
    result = Burst(
        seconds, idle, during, rss_before, rss_mb(pid), [tree_messages(c) for c in watchers]
    )
    for client in [*watchers, prober.client]:
        client.disconnect()
    return result


def report(got: Burst, files: int, clients: int, async_mode: str) -> bool:
    """Print the figures; whether every expectation held."""
    sizes = [sum(len(json.dumps(m)) for m in ms) for ms in got.messages]
    idle_p99, burst_p99 = p99(got.idle), p99(got.during)
    ratio, kept = burst_p99 / idle_p99, got.rss_after - got.rss_before
    repeated = max(repeated_paths(ms) for ms in got.messages)
    print(
        f"{files:,} files created then deleted by another process, {clients} clients, "
        f"{async_mode}, {got.seconds:.1f} s"
    )
    print(
        f"file_tree per client      {max(len(ms) for ms in got.messages):8d} messages "
        f"{max(sizes):12,d} bytes   expected <= {MAX_BYTES_PER_CLIENT:,}"
    )
    print(f"paths repeated in a message {repeated:6d}                      expected 0")
    print(f"get_status p99 idle       {idle_p99 * 1000:8.1f} ms ({len(got.idle)} acks)")
    print(
        f"get_status p99 burst      {burst_p99 * 1000:8.1f} ms ({len(got.during)} acks)   "
        f"ratio {ratio:.1f}, expected <= {MAX_P99_RATIO:g}"
    )
    print(
        f"server RSS kept           {kept:8.1f} MB ({got.rss_before:.0f} -> "
        f"{got.rss_after:.0f})   expected <= {MAX_RSS_KEPT_MB:g}"
    )
    return (
        max(sizes) <= MAX_BYTES_PER_CLIENT
        and repeated == 0
        and ratio <= MAX_P99_RATIO
        and kept <= MAX_RSS_KEPT_MB
    )


def run(files: int, clients: int, async_mode: str) -> bool:
    with tempfile.TemporaryDirectory() as tmp, FakeLLM("deepseek") as fake:
        workspace = Path(tmp) / "ws"
        workspace.mkdir()
        server = ServerProcess(
            workspace,
            Path(tmp) / "data",
            base_url=fake.base_url,
            api_key=fake.api_key,
            async_mode=async_mode,
        )
        with server:
            assert server.pid is not None
            got = burst(server.url, server.pid, workspace, files, clients)
    return report(got, files, clients, async_mode)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=20_000)
    parser.add_argument("--clients", type=int, default=2)
    parser.add_argument("--async-mode", choices=["threading", "eventlet"], default="threading")
    parser.add_argument("--check", action="store_true", help="exit 1 if an expectation fails")
    args = parser.parse_args()
    ok = run(args.files, args.clients, args.async_mode)
    return 1 if args.check and not ok else 0


if __name__ == "__main__":
    sys.exit(main())
