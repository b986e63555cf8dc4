"""Read floor: what merely reading N paced model streams costs, with nothing relayed.

Run from the repo root: `python bench/read_floor.py [--conversations 10,25,50] [--seconds 6]`.

The fake model API is bench/pace.py's (a process of its own, 100 deltas/s per conversation).
This process reads every stream to its end and does nothing else; the CPU it spends (user +
system, all threads) divided by the deltas read is the floor under any relay's CPU per token.
Two readers, one after the other per N:

- `client`: our own read path, `utils.api_client.ApiClient.stream` (the `openai` client's
  streaming response over httpx2, our SSE and chunk parsing), one thread per stream as in
  the web server;
- `socket`: the least a Python reader can do: one `selectors` loop over raw sockets, one
  `recv` per wake-up and one `json.loads` per SSE line, no HTTP client at all.

Issue 14's goal 1 asks for <= 100 us of server CPU per token, reading and relaying together;
`x goal` shows what reading alone costs against it.
"""

from __future__ import annotations

import argparse
import json
import selectors
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.pace_fake import FakeProcess
from bench.pace_figures import GOAL_CPU_US, cpu_seconds, own_cpu
from model.api_client import ApiClient
from model.completion import ContentDelta
from model.messages import ChatMessage
from model.providers import resolve_provider
from utils.cancel import CancelToken
from utils.settings import Settings

RATE = 100.0  # deltas per second per conversation, as bench/pace.py
MESSAGES: list[ChatMessage] = [{"role": "user", "content": "read floor"}]


def read_with_client(fake: FakeProcess, conversations: int, data_dir: Path) -> int:
    """Every stream through ApiClient.stream, a thread each; the content deltas read."""
    settings = Settings(
        provider="deepseek",
        base_url=fake.base_url,
        api_key=fake.api_key,
        workspace=data_dir / "ws",
        data_dir=data_dir,
    )
    client = ApiClient(resolve_provider(settings), settings)
    client.warm()
    counts = [0] * conversations

    def read(index: int) -> None:
        stream = client.stream(MESSAGES, [], thinking=False, cancel=CancelToken())
        counts[index] = sum(isinstance(item, ContentDelta) for item in stream)

    threads = [threading.Thread(target=read, args=(i,), daemon=True) for i in range(conversations)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    client.close()
    return sum(counts)


def read_with_sockets(fake: FakeProcess, conversations: int, data_dir: Path) -> int:
    """Every stream on a raw socket, all in one selectors loop; the content deltas read."""
    url = urlsplit(fake.base_url)
    body = json.dumps({"model": fake.model, "messages": MESSAGES, "stream": True}).encode()
    request = (
        f"POST {url.path}/chat/completions HTTP/1.1\r\nHost: {url.netloc}\r\n"
        f"Authorization: Bearer {fake.api_key}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode() + body
    selector = selectors.DefaultSelector()
    pending: dict[socket.socket, bytes] = {}
    for _ in range(conversations):
        sock = socket.create_connection((url.hostname, url.port))
        sock.sendall(request)
        sock.setblocking(False)
        selector.register(sock, selectors.EVENT_READ)
        pending[sock] = b""
    deltas = 0
    while pending:
        for key, _ in selector.select():
            conn = key.fileobj
            assert isinstance(conn, socket.socket)
            data = conn.recv(65536)
            *lines, pending[conn] = (pending[conn] + data).split(b"\n")
            for line in lines:
                if line.startswith(b"data: {"):
                    chunk = json.loads(line[6:])
                    deltas += any(c["delta"].get("content") for c in chunk["choices"])
            if not data or b"data: [DONE]" in data:
                selector.unregister(conn)
                conn.close()
                del pending[conn]
    return deltas


READERS: dict[str, Callable[[FakeProcess, int, Path], int]] = {
    "client": read_with_client,
    "socket": read_with_sockets,
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", default="10,25,50")
    parser.add_argument("--seconds", type=float, default=6.0)
    args = parser.parse_args()
    deltas = int(args.seconds * RATE)
    goal = f"goal 1: <= {GOAL_CPU_US:.0f} us/token"
    print(f"{RATE:.0f} deltas/s per conversation, {deltas} each; {goal}")
    print("reader    N  deltas /s/conv  reader us/tok  fake us/tok  x goal  reader CPUs busy")
    fake = FakeProcess.start(deltas, RATE)
    try:
        with tempfile.TemporaryDirectory(prefix="read-floor-") as tmp:
            for n in (int(part) for part in args.conversations.split(",")):
                for name, read in READERS.items():
                    cpu0, fake0, started = own_cpu(), cpu_seconds(fake.pid), time.monotonic()
                    read_deltas = read(fake, n, Path(tmp))
                    seconds = time.monotonic() - started
                    used, fake_used = own_cpu() - cpu0, cpu_seconds(fake.pid) - fake0
                    us = used / max(read_deltas, 1) * 1e6
                    print(
                        f"{name:7} {n:3} {read_deltas:7} {read_deltas / n / seconds:6.1f}"
                        f" {us:14.0f} {fake_used / max(read_deltas, 1) * 1e6:12.0f}"
                        f" {us / GOAL_CPU_US:7.2f} {used / seconds:17.2f}"
                    )
    finally:
        fake.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
