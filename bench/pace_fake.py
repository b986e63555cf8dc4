"""The fake model API for bench/pace.py and bench/relay_floor.py, at a model's pace.

Runs in a process of its own (`python bench/pace_fake.py DELTAS:RATE`, started by
`FakeProcess.start`), so its CPU is not the server's nor the clients': every conversation's
reply is DELTAS one-character deltas, one every 1/RATE seconds, each stamped with its send
time (`Reply(stamp=True)`); a message starting with "warm" gets a short unstamped reply.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.fake_llm import FakeLLM, RecordedRequest, Reply, Response


def _responder(deltas: int, rate: float) -> Callable[[RecordedRequest], Response]:
    def respond(request: RecordedRequest) -> Response:
        if request.last_user_text.startswith("warm"):
            return Reply(content="warm up", chunk_size=1)
        return Reply(content="x" * deltas, chunk_size=1, delay=1 / rate, stamp=True)

    return respond


@dataclass
class FakeProcess:
    """The fake model API in a process of its own (its own GIL and its own /proc figures)."""

    pid: int
    base_url: str
    api_key: str
    model: str
    process: subprocess.Popen[str]

    @classmethod
    def start(cls, deltas: int, rate: float) -> FakeProcess:
        return cls.launch([sys.executable, __file__, f"{deltas}:{rate}"])

    @classmethod
    def launch(cls, argv: list[str]) -> FakeProcess:
        """Start a fake that prints `fake BASE_URL API_KEY MODEL` once it serves."""
        process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert process.stdout is not None
        line = process.stdout.readline().split()
        if len(line) != 4 or line[0] != "fake":
            process.kill()
            process.wait()
            raise RuntimeError(f"the fake did not start: {line}")
        return cls(process.pid, line[1], line[2], line[3], process)

    def stop(self) -> None:
        assert self.process.stdin is not None
        with contextlib.suppress(OSError):
            self.process.stdin.close()  # the fake's signal to end
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def serve_fake(spec: str) -> int:
    """Serve DELTAS:RATE until stdin closes (at most a few hours)."""
    deltas, rate = spec.split(":")
    with FakeLLM("deepseek") as fake:
        fake.responder = _responder(int(deltas), float(rate))
        print(f"fake {fake.base_url} {fake.api_key} {fake.model}", flush=True)
        reader = threading.Thread(target=sys.stdin.read, daemon=True)
        reader.start()
        reader.join(4 * 3600)
    return 0


if __name__ == "__main__":
    sys.exit(serve_fake(sys.argv[1]))
