"""Long conversation benchmark: server CPU per task at the 50th task against the first.

Run from the repo root:
`python bench/long_conversation.py [--conversations 2] [--tasks 50] [--calls 10] [--idle 20]
[--async-mode threading|eventlet] [--py-spy DIR]`.

A real `main.py web` process runs against a fake model (bench/long_conversation_fake.py, a
process of its own) whose every task is `--calls` model calls: tool calls (read_file,
list_files, run_command, search_code, each with real output from a small project) and then
an answer. A real Socket.IO client (gathered deltas, as the page asks) starts task k of every
conversation at once and waits for their `done`s, `--tasks` rounds. Printed:

- per round: server CPU per task (utime+stime of the server and its children from /proc,
  over the round, divided by the conversations; and the part in the kernel), send->done
  p50, the size of the first conversation's messages.jsonl;
- the floor of the same run: the captured requests of an early and a late task sent again
  by a bare process, JSON-encoded as the SDK does and posted to a fake that answers `ok`:
  what the bytes of the request itself cost;
- the goal: CPU per task at the last rounds, less what the floor grew by, <= 1.5 x the first
  rounds' CPU per task (exit code 1 when missed);
- the server's RSS after warming up, after the last task, and after `--idle` seconds idle.

`--py-spy DIR` records the server (GIL holders) during the first and the last rounds into
DIR/first.txt and DIR/last.txt and prints where their samples go.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.long_conversation_fake import CAPTURE, workspace_files
from bench.pace_fake import FakeProcess
from bench.pace_figures import cpu_times, percentile, verdict
from bench.pace_profile import start_py_spy, summarise_py_spy
from tests.kit.server import ServerProcess
from tests.kit.settings import TOKEN
from workspace_client.connection import Connection

GOAL_RATIO = 1.5
FAKE = str(Path(__file__).with_name("long_conversation_fake.py"))
SERVER_ENV = {"AGENT_SANDBOX": "local", "AGENT_LOCAL_SANDBOX_BUBBLEWRAP": "false"}


class Driver:
    """One Socket.IO connection that starts tasks and notes when each conversation is done."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._connection: Connection | None = None
        self._done_at: dict[str, float] = {}
        self._all_done = threading.Condition()

    def _on_event(self, name: str, payload: Any) -> None:
        if name == "done" and payload.get("depth") is None:
            with self._all_done:
                self._done_at[str(payload.get("conversation_id"))] = time.monotonic()
                self._all_done.notify_all()

    def connect(self) -> Driver:
        auth = {"token": TOKEN, "batch_deltas": True}
        self._connection = Connection(self.url, auth=auth, on_event=self._on_event)
        return self

    def round(self, texts: list[tuple[str | None, str]], timeout: float) -> dict[str, float]:
        """Start one task per (conversation id or None, text) at once; seconds to each done,
        by conversation id, in the order of `texts`."""
        with self._all_done:
            self._done_at.clear()
        slots: list[tuple[str, float] | None] = [None] * len(texts)

        def start(n: int, conversation_id: str | None, text: str) -> None:
            asked = time.monotonic()
            payload = {"conversation_id": conversation_id, "text": text}
            assert self._connection is not None
            ack = self._connection.call("send_message", payload, timeout=30)
            assert ack and ack.get("ok"), ack
            slots[n] = (str(ack["conversation_id"]), asked)

        starters = [threading.Thread(target=start, args=(n, *pair)) for n, pair in enumerate(texts)]
        for starter in starters:
            starter.start()
        for starter in starters:
            starter.join(30)
        sent = [slot for slot in slots if slot is not None]
        with self._all_done:
            finished = self._all_done.wait_for(
                lambda: len(sent) == len(texts) and all(c in self._done_at for c, _ in sent),
                timeout,
            )
            if not finished:
                raise RuntimeError(f"tasks did not end within {timeout:g} s")
            return {cid: self._done_at[cid] - asked for cid, asked in sent}

    def disconnect(self) -> None:
        if self._connection is not None:
            self._connection.close()


@dataclass
class Round:
    number: int
    cpu_per_task: float
    system_per_task: float  # the part of cpu_per_task spent in the kernel
    seconds: list[float]
    history_kb: float


@dataclass
class Results:
    rounds: list[Round] = field(default_factory=list)
    rss_mb: dict[str, float] = field(default_factory=dict)
    floor_s: dict[int, float] = field(default_factory=dict)  # task -> CPU s of its requests
    request_kb: dict[int, float] = field(default_factory=dict)  # task -> its requests' KB


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def captured_tasks(tasks: int, window: int) -> tuple[int, int]:
    """The tasks whose requests the floor sends: the middle of the first and of the last rounds."""
    return (window + 1) // 2, tasks - window // 2


def texts(
    ids: list[str | None], task: int, capture: tuple[int, int]
) -> list[tuple[str | None, str]]:
    """Round `task`'s messages: conversation 0's captured on the floor's tasks."""
    return [
        (cid, f"task {task} of conversation {c}" + (CAPTURE if c == 0 and task in capture else ""))
        for c, cid in enumerate(ids)
    ]


class Profiler:
    """py-spy on the server over the first `window` rounds and over the last ones."""

    def __init__(self, pid: int, folder: Path | None, tasks: int, window: int) -> None:
        self.pid, self.folder = pid, folder
        self.starts = {1: "first", tasks - window + 1: "last"}
        self.stops = {window, tasks}
        self.spy: subprocess.Popen[bytes] | None = None

    def before(self, task: int) -> None:
        if self.folder is not None and task in self.starts:
            self.folder.mkdir(parents=True, exist_ok=True)
            self.spy = start_py_spy(self.pid, self.folder / f"{self.starts[task]}.txt", 3600)

    def after(self, task: int) -> None:
        if self.spy is None or task not in self.stops:
            return
        self.spy.send_signal(signal.SIGINT)  # py-spy writes what it sampled and exits
        try:
            self.spy.wait(60)
        except subprocess.TimeoutExpired:
            self.spy.kill()
            self.spy.wait()
        self.spy = None


def run_rounds(server: ServerProcess, pid: int, args: argparse.Namespace, results: Results) -> None:
    driver = Driver(server.url).connect()
    try:
        driver.round([(None, "task 0 of conversation 99")], 120)  # warm up: imports, connections
        time.sleep(1)
        results.rss_mb["after warm-up"] = rss_mb(pid)
        ids: list[str | None] = [None] * args.conversations
        capture = captured_tasks(args.tasks, args.window)
        profiler = Profiler(pid, args.py_spy, args.tasks, args.window)
        for k in range(1, args.tasks + 1):
            profiler.before(k)
            user0, system0 = cpu_times(pid)
            seconds = driver.round(texts(ids, k, capture), 600)
            user1, system1 = cpu_times(pid)
            profiler.after(k)
            ids = list(seconds)  # in the order they were given (send_message's acks name them)
            history = server.data_dir / "conversations" / str(ids[0]) / "messages.jsonl"
            kb = history.stat().st_size / 1024 if history.exists() else float("nan")
            cpu, system = user1 + system1 - user0 - system0, system1 - system0
            results.rounds.append(
                Round(k, cpu / len(ids), system / len(ids), list(seconds.values()), kb)
            )
            print_round(results.rounds[-1], args)
        results.rss_mb["after the last task"] = rss_mb(pid)
        time.sleep(args.idle)
        results.rss_mb[f"after {args.idle:g} s idle"] = rss_mb(pid)
    finally:
        driver.disconnect()


def print_round(row: Round, args: argparse.Namespace) -> None:
    last = args.tasks - args.window
    if row.number <= args.window or row.number > last or row.number % 10 == 0:
        p50 = percentile(row.seconds, 50)
        print(
            f"{row.number:>6}{row.cpu_per_task:>12.3f}{row.system_per_task:>12.3f}{p50:>12.2f}"
            f"{row.history_kb:>12.0f}",
            flush=True,
        )


def measure_floor(args: argparse.Namespace, capture_dir: Path, results: Results) -> None:
    """Send the captured requests again from a bare process; CPU per task's requests."""
    files = [capture_dir / f"0-{k}.json" for k in captured_tasks(args.tasks, args.window)]
    fake = FakeProcess.launch([sys.executable, FAKE, "ok"])
    try:
        argv = [sys.executable, FAKE, "floor", fake.base_url, fake.api_key, str(args.repeat)]
        out = subprocess.run(
            argv + [str(f) for f in files], capture_output=True, text=True, timeout=600, check=True
        ).stdout
    finally:
        fake.stop()
    for line in out.splitlines():
        _, name, seconds, size = line.split()
        task = int(name.removesuffix(".json").split("-")[1])
        results.floor_s[task], results.request_kb[task] = float(seconds), int(size) / 1024


def report(args: argparse.Namespace, results: Results) -> bool:
    """The goal's figures; whether it was met."""
    rounds = results.rounds
    first = statistics.mean(r.cpu_per_task for r in rounds[: args.window])
    last = statistics.mean(r.cpu_per_task for r in rounds[-args.window :])
    early, late = captured_tasks(args.tasks, args.window)
    grown = results.floor_s[late] - results.floor_s[early]
    beyond = last - grown
    ratio, beyond_ratio = last / first, beyond / first
    ok = beyond_ratio <= GOAL_RATIO
    print(
        f"\nserver CPU per task: rounds 1-{args.window} {first:.3f} s, rounds "
        f"{args.tasks - args.window + 1}-{args.tasks} {last:.3f} s: x{ratio:.2f}"
    )
    print(
        f"floor (a bare process encoding and sending the same {args.calls} requests): task "
        f"{early} {results.floor_s[early]:.3f} s ({results.request_kb[early]:.0f} KB), task "
        f"{late} {results.floor_s[late]:.3f} s ({results.request_kb[late]:.0f} KB): "
        f"+{grown:.3f} s"
    )
    print(
        f"beyond the request's bytes: {beyond:.3f} s = x{beyond_ratio:.2f} the first rounds' "
        f"<= x{GOAL_RATIO} {verdict(ok)}"
    )
    p50s = [percentile(r.seconds, 50) for r in (rounds[0], rounds[-1])]
    print(f"send->done p50: task 1 {p50s[0]:.2f} s, task {args.tasks} {p50s[1]:.2f} s")
    print("server RSS: " + ", ".join(f"{k} {v:.0f} MB" for k, v in results.rss_mb.items()))
    return ok


def run(args: argparse.Namespace) -> bool:
    results = Results()
    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="long-conv-")))
        capture_dir, workspace = tmp / "capture", tmp / "ws"
        capture_dir.mkdir()
        for name, text in workspace_files().items():
            (workspace / name).parent.mkdir(parents=True, exist_ok=True)
            (workspace / name).write_text(text)
        fake = FakeProcess.launch(
            [sys.executable, FAKE, "serve", str(args.calls), str(capture_dir)]
        )
        stack.callback(fake.stop)
        server = ServerProcess(
            workspace,
            tmp / "data",
            base_url=fake.base_url,
            api_key=fake.api_key,
            async_mode=args.async_mode,
            env=SERVER_ENV,
        ).start(30)
        stack.callback(server.stop)
        pid = server.pid
        assert pid is not None
        print(
            f"{args.conversations} conversations x {args.tasks} tasks of {args.calls} model calls"
            f" ({args.async_mode}); server pid {pid}, fake pid {fake.pid}"
        )
        print(f"{'task':>6}{'CPU s/task':>12}{'of it sys':>12}{'p50 s':>12}{'history KB':>12}")
        run_rounds(server, pid, args, results)
        server.stop()
        measure_floor(args, capture_dir, results)
    return report(args, results)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--conversations", type=int, default=2)
    parser.add_argument("--tasks", type=int, default=50)
    parser.add_argument("--calls", type=int, default=10, help="model calls per task")
    parser.add_argument("--window", type=int, default=3, help="rounds averaged at each end")
    parser.add_argument("--idle", type=float, default=20.0, help="seconds idle before the RSS")
    parser.add_argument("--repeat", type=int, default=5, help="sendings of each floor request")
    parser.add_argument("--async-mode", choices=["threading", "eventlet"], default="threading")
    parser.add_argument("--py-spy", type=Path, help="record the server into this folder")
    args = parser.parse_args()
    args.window = max(1, min(args.window, args.tasks // 2))
    ok = run(args)
    if args.py_spy is not None:
        for name in ("first", "last"):
            if (args.py_spy / f"{name}.txt").exists():
                summarise_py_spy(args.py_spy / f"{name}.txt")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
