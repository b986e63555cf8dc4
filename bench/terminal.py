"""The person's terminal: a keystroke's echo (p50, p99) and `cat` of a 10 MB file, through our
path against a bare PTY relayed over Flask-SocketIO.

Run from the repo root: `python bench/terminal.py [--keys 200] [--megabytes 10] [--rounds 3]
[--no-page]`.
Exit code 1 when a goal is missed.

- `ours`: the real `main.py web` (threading, the local sandbox under bubblewrap): the client
  (workspace_client's connection, tests.kit's EventClient) opens a terminal with
  terminal_open, types with terminal_input and reads `terminal` events: Socket.IO to the
  server, the PTY's master written there, bash in the conversation's sandbox session, the
  session's output pump, core/terminals.py's relay, Socket.IO back.
- `bare`, the floor: a Flask-SocketIO server in threading mode (our web server's stack) with a
  local PTY running the same `bash -i` (no sandbox): an `input` event is written to the
  master, each read of it (at most 64 KiB, decoded) is emitted as a `terminal` event.

- `page`: the same `cat` typed into the page's terminal (xterm.js) in headless Chromium on
  `ours`: the time until END-2 shows on its screen, and the page's main-thread tasks meanwhile:
  the PerformanceObserver's `longtask` entries (wall time, which a loaded machine stretches
  when it takes the CPU from the page) and, from a Chromium trace, the longest task in the
  main thread's own CPU time (what the page's work costs).

A keystroke: one character typed (emitted, not waited for), timed until its echo comes back
(the line is cleared with Ctrl-U every 50). The cat: `cat big.txt; echo END-$((1+1))` typed,
timed until END-2 comes. Goals (medians of the rounds): ours ÷ bare ≤ 1.3 for the echo's p50
and p99 and for the cat; no task of the page's main thread over 50 ms during the cat.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pty
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.fake_llm import FakeLLM
from tests.kit.clients import EventClient, connected
from tests.kit.model import calls_in_the_message, run_calls
from tests.kit.server import REPO, ServerProcess, free_port, listening
from tests.kit.settings import TOKEN

GOAL = 1.3
LONG_TASK_MS = 50
TRACED = ["devtools.timeline", "disabled-by-default-devtools.timeline"]  # tasks with CPU times
SCREEN = "[data-testid=terminal-screen]:not([hidden])"
SHOWN = f"{SCREEN} .xterm-rows"
# The page's main-thread tasks over 50 ms from now on (the browser reports no shorter ones).
OBSERVE = """() => {
  window.benchLongTasks = [];
  new PerformanceObserver((list) => {
    for (const task of list.getEntries()) window.benchLongTasks.push(task.duration);
  }).observe({ type: "longtask" });
}"""
WAIT_SECONDS = 120.0
KEY = "k"


class Screen:
    """What a client received of a terminal, and a wait for text in it."""

    def __init__(self) -> None:
        self.text = ""
        self.changed = threading.Condition()

    def take(self, payload: dict[str, Any]) -> None:
        with self.changed:
            self.text += payload.get("data") or ""
            self.changed.notify_all()

    def wait_for(self, count: int, needle: str) -> float:
        """Wait until `needle` occurs `count` times; the time then."""
        with self.changed:
            if not self.changed.wait_for(lambda: self.text.count(needle) >= count, WAIT_SECONDS):
                raise RuntimeError(f"{needle!r} did not come: {self.text[-300:]!r}")
            return time.perf_counter()


def measure(client: EventClient, screen: Screen, send: Any, keys: int) -> dict[str, Any]:
    """Type `keys` characters one at a time, then the cat; the echo times and the cat's."""
    send("echo READY-$((2+2))\n")
    screen.wait_for(1, "READY-4")
    echoes = []
    for number in range(keys):
        if number % 50 == 0:
            send("\x15")  # Ctrl-U: a short line
            time.sleep(0.05)
        seen = screen.text.count(KEY)
        started = time.perf_counter()
        send(KEY)
        echoes.append(screen.wait_for(seen + 1, KEY) - started)
    send("\x15")
    time.sleep(0.1)
    started = time.perf_counter()
    send("cat big.txt; echo END-$((1+1))\n")
    cat = screen.wait_for(1, "END-2") - started
    return {"echoes": echoes, "cat": cat}


def ours(root: Path, keys: int) -> dict[str, Any]:
    workspace = root / "ws"
    with FakeLLM() as fake:
        fake.responder = calls_in_the_message
        env = {"AGENT_SANDBOX": "local"}
        server = ServerProcess(workspace, root / "data", base_url=fake.base_url,
                               api_key=fake.api_key, env=env)  # fmt: skip
        with server, connected(server.url) as client:
            if client.call("get_status")["sandbox"]["kind"] != "bubblewrap":
                raise SystemExit("bubblewrap is not usable here")
            _, cid = run_calls(client, [("run_command", {"command": "true"})])
            screen = Screen()
            client.on("terminal", screen.take)
            ack = client.call("terminal_open", {"conversation_id": cid, "rows": 40, "cols": 120})
            ref = {"conversation_id": cid, "terminal_id": ack["terminal_id"]}
            return measure(client, screen,
                           lambda data: client.emit("terminal_input", {**ref, "data": data}),
                           keys)  # fmt: skip


def in_page(root: Path) -> dict[str, Any]:
    """The cat in the page's terminal, in Chromium on our server: its time until END-2 shows,
    and the page's long tasks meanwhile (their durations)."""
    from playwright.sync_api import sync_playwright

    from tests.kit.browser import CHROMIUM, CHROMIUM_ARGS

    with FakeLLM() as fake:
        fake.responder = calls_in_the_message
        server = ServerProcess(root / "ws", root / "data", base_url=fake.base_url,
                               api_key=fake.api_key, env={"AGENT_SANDBOX": "local"})  # fmt: skip
        with server, sync_playwright() as driver:
            with connected(server.url) as client:
                _, cid = run_calls(client, [("run_command", {"command": "true"})])
            browser = driver.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.set_default_timeout(WAIT_SECONDS * 1000)
            page.goto(f"{server.url}/?token={TOKEN}#c={cid}")
            page.click("[data-testid=terminal-toggle]")
            shows = f"(text) => document.querySelector('{SHOWN}')?.innerText.includes(text)"
            page.wait_for_function(shows, arg="$", polling=100)
            page.click(SCREEN)
            page.keyboard.type("cat big.txt; echo END-$((1+1))")
            page.evaluate(OBSERVE)
            browser.start_tracing(page=page, categories=TRACED)
            started = time.perf_counter()
            page.keyboard.press("Enter")
            page.wait_for_function(shows, arg="END-2", polling=100)
            cat = time.perf_counter() - started
            cpu = longest_cpu_task(browser.stop_tracing())
            tasks = [float(ms) for ms in page.evaluate("window.benchLongTasks")]
            browser.close()
            return {"cat": cat, "tasks": tasks, "cpu": cpu}


def longest_cpu_task(trace: bytes) -> float:
    """The longest task of the page's main thread in its own CPU time (ms), from a trace."""
    events = json.loads(trace)["traceEvents"]
    named = [e for e in events if e.get("name") == "thread_name"]
    mains = {(e["pid"], e["tid"]) for e in named if e["args"].get("name") == "CrRendererMain"}
    tasks = [e for e in events if (e["pid"], e["tid"]) in mains and e.get("name") == "RunTask"]
    return max((e.get("tdur", 0) / 1000 for e in tasks), default=0.0)


def serve_bare(port: int, folder: str) -> None:
    import logging

    from flask import Flask, request
    from flask_socketio import SocketIO

    app = Flask(__name__)
    sio = SocketIO(app, async_mode="threading")
    shells: dict[str, int] = {}

    def relay(sid: str, master: int) -> None:
        offset = 0
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:
                return
            if not data:
                return
            event = {"terminal_id": "t1", "offset": offset, "data": data.decode(errors="replace")}
            sio.emit("terminal", event, to=sid)
            offset += len(data)

    @sio.on("open")
    def open_terminal(data: dict[str, Any]) -> dict[str, Any]:
        pid, master = pty.fork()
        if pid == 0:
            os.chdir(folder)
            os.execvp("env", ["env", "TERM=xterm-256color", "bash", "-i"])
        sid = request.sid  # type: ignore[attr-defined]
        shells[sid] = master
        sio.start_background_task(relay, sid, master)
        return {"ok": True}

    @sio.on("input")
    def typed(data: dict[str, Any]) -> None:
        os.write(shells[request.sid], data["data"].encode())  # type: ignore[attr-defined]

    logging.getLogger("werkzeug").setLevel(logging.CRITICAL)
    sio.run(app, host="127.0.0.1", port=port, allow_unsafe_werkzeug=True, log_output=False)


def bare(root: Path, keys: int) -> dict[str, Any]:
    port = free_port()
    argv = [sys.executable, __file__, "--serve-bare", str(port), str(root / "ws")]
    with served(argv) as process:
        if not listening(port, 30) or process.poll() is not None:
            raise RuntimeError("the bare relay did not start")
        with connected(f"http://127.0.0.1:{port}") as client:
            screen = Screen()
            client.on("terminal", screen.take)
            assert client.call("open", {})["ok"]
            return measure(client, screen, lambda data: client.emit("input", {"data": data}),
                           keys)  # fmt: skip


@contextlib.contextmanager
def served(argv: list[str]) -> Iterator[subprocess.Popen[bytes]]:
    process = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.DEVNULL)
    try:
        yield process
    finally:
        process.terminate()
        process.wait(10)


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def write_big_file(folder: Path, megabytes: float) -> None:
    """big.txt: `megabytes` MB of 1 KiB lines."""
    folder.mkdir(parents=True)
    size = int(megabytes * 1_000_000)
    line = (b"x" * 1023 + b"\n") * 64
    (folder / "big.txt").write_bytes((line * (size // len(line) + 1))[:size])


def run_rounds(args: argparse.Namespace) -> dict[str, dict[str, list[float]]]:
    """Each round: bare, ours, then the page; every figure, by path and name."""
    figures: dict[str, dict[str, list[float]]] = {
        name: {"p50": [], "p99": [], "cat": [], "tasks": [], "cpu": []}
        for name in ("bare", "ours", "page")
    }
    with tempfile.TemporaryDirectory() as tmp:
        for number in range(1, args.rounds + 1):
            for name, run in (("bare", bare), ("ours", ours)):
                root = Path(tmp) / f"{name}-{number}"
                write_big_file(root / "ws", args.megabytes)
                got = run(root, args.keys)
                p50, p99 = percentile(got["echoes"], 0.5), percentile(got["echoes"], 0.99)
                for key, value in (("p50", p50), ("p99", p99), ("cat", got["cat"])):
                    figures[name][key].append(value)
                print(f"round {number} {name:<5} echo p50 {p50 * 1000:6.2f} ms  p99 "
                      f"{p99 * 1000:6.2f} ms  cat {got['cat']:6.3f} s", flush=True)  # fmt: skip
            if args.no_page:
                continue
            root = Path(tmp) / f"page-{number}"
            write_big_file(root / "ws", args.megabytes)
            got = in_page(root)
            figures["page"]["cat"].append(got["cat"])
            figures["page"]["tasks"].extend(got["tasks"])
            figures["page"]["cpu"].append(got["cpu"])
            longest = max(got["tasks"], default=0.0)
            print(f"round {number} page  cat {got['cat']:6.3f} s  tasks over {LONG_TASK_MS} ms: "
                  f"{len(got['tasks'])}, longest {longest:.0f} ms; longest in CPU time "
                  f"{got['cpu']:.1f} ms", flush=True)  # fmt: skip
    return figures


def report(figures: dict[str, dict[str, list[float]]], rounds: int) -> bool:
    """Print the medians and ratios; whether every goal is met."""
    met = True
    print(f"\nmedians of {rounds} rounds, ours ÷ bare (goal ≤ {GOAL}):")
    for key in ("p50", "p99", "cat"):
        floor, mine = (statistics.median(figures[n][key]) for n in ("bare", "ours"))
        ratio = mine / floor
        met = met and ratio <= GOAL
        unit, scale = ("s", 1.0) if key == "cat" else ("ms", 1000.0)
        print(f"  {key}: bare {floor * scale:.3f} {unit}, ours {mine * scale:.3f} {unit}, "
              f"ratio {ratio:.2f}")  # fmt: skip
    page = figures["page"]
    if page["cat"]:
        tasks = page["tasks"]
        print(f"  the page: cat shown in {statistics.median(page['cat']):.3f} s; main-thread "
              f"tasks over {LONG_TASK_MS} ms: {len(tasks)} (goal 0), longest "
              f"{max(tasks, default=0):.0f} ms; the longest in the main thread's CPU time "
              f"{max(page['cpu']):.1f} ms")  # fmt: skip
        met = met and not tasks
    print(f"  load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    return met


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--keys", type=int, default=200)
    parser.add_argument("--megabytes", type=float, default=10.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-page", action="store_true", help="leave out the page (Chromium)")
    parser.add_argument("--serve-bare", nargs=2, help=argparse.SUPPRESS)  # internal
    args = parser.parse_args()
    if args.serve_bare:
        serve_bare(int(args.serve_bare[0]), args.serve_bare[1])
        return 0
    print(f"load average at the start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    return 0 if report(run_rounds(args), args.rounds) else 1


if __name__ == "__main__":
    sys.exit(main())
