"""Relay benchmark: model deltas read raw vs. received through the web server, then fan-out.

Run from the repo root:
`python bench/relay.py [--deltas 4000] [--conversations 50] [--async-mode threading|eventlet]`.

1. The fake model API (in this process) streams `--deltas` one-character deltas as fast as it
   can. We time them read raw with the `openai` client, then received as `token` events by a
   Socket.IO client through a real `main.py web` process; the ratio should be >= 0.9.
2. `--conversations` conversations run at once, each streaming `--conversation-deltas` deltas
   of its own text; we count every event, check that none is lost (per-conversation seq
   contiguity, token count and text) and report the aggregate event rate.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import openai

from tests.fake_llm import FakeLLM, RecordedRequest, Reply, Response
from tests.kit.clients import EventClient
from tests.kit.events import Received
from tests.kit.server import ServerProcess

GOAL_RATIO = 0.9
RUNS = 3
CLIENTS = 10


def _text(seed: str, length: int) -> str:
    return "".join(seed[i % len(seed)] for i in range(length))


def _responder(deltas: dict[str, str]) -> Callable[[RecordedRequest], Response]:
    """Answer each prompt with its own text, one character per delta, no delay."""

    def respond(request: RecordedRequest) -> Response:
        return Reply(content=deltas[request.last_user_text], chunk_size=1)

    return respond


def raw_rate(fake: FakeLLM, prompt: str, expected: int) -> float:
    """Deltas per second read straight from the fake with the openai client."""
    client = openai.OpenAI(base_url=fake.base_url, api_key=fake.api_key, max_retries=0)
    started = time.perf_counter()
    stream = client.chat.completions.create(
        model=fake.model,
        messages=[{"role": "user", "content": prompt}],
        stream=True,
        extra_body={"thinking": {"type": "disabled"}},
    )
    count = 0
    last = started
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            count += 1
            last = time.perf_counter()
    client.close()
    assert count == expected, f"raw read {count} deltas, expected {expected}"
    return count / (last - started)


def relay_rate(client: EventClient, prompt: str, expected: int) -> float:
    """Token events per second received through the server, from send to the last token."""
    started = time.monotonic()
    cid = client.start(prompt)
    events = client.wait_done(cid, timeout=300)
    tokens = [e for e in events if e.name == "token"]
    assert len(tokens) == expected, f"relayed {len(tokens)} tokens, expected {expected}"
    return len(tokens) / (tokens[-1].at - started)


@dataclass
class FanOut:
    events: int
    lost: int
    gaps: int
    wrong_text: int
    seconds: float


def fan_out(url: str, fake: FakeLLM, conversations: int, deltas: int) -> FanOut:
    """Run `conversations` tasks at once over CLIENTS connections; count and check events."""
    texts = {f"fan {n:03d}": _text(f"[{n:03d}]", deltas) for n in range(conversations)}
    fake.responder = _responder(texts)
    clients = [EventClient(url).connect() for _ in range(CLIENTS)]
    try:
        started = time.monotonic()
        owners = {}
        for n, prompt in enumerate(texts):
            owner = clients[n % CLIENTS]
            owners[owner.start(prompt)] = (owner, prompt)
        results = {cid: owner.wait_done(cid, timeout=600) for cid, (owner, _) in owners.items()}
        seconds = max(events[-1].at for events in results.values()) - started
    finally:
        for client in clients:
            client.disconnect()
    report = FanOut(0, 0, 0, 0, seconds)
    for cid, events in results.items():
        prompt = owners[cid][1]
        report.events += len(events)
        report.gaps += _gaps(events)
        tokens = [e for e in events if e.name == "token"]
        report.lost += deltas - len(tokens)
        report.wrong_text += "".join(e.payload["text"] for e in tokens) != texts[prompt]
    return report


def _gaps(events: list[Received]) -> int:
    seqs = [e.payload["seq"] for e in events]
    return sum(1 for a, b in itertools.pairwise(seqs) if b != a + 1) + (seqs[0] != 1)


def run(deltas: int, conversations: int, conversation_deltas: int, async_mode: str) -> bool:
    """Measure, print and return whether the goals were met."""
    relay_text = _text("relay-bench ", deltas)
    with FakeLLM("deepseek") as fake, tempfile.TemporaryDirectory(prefix="relay-") as tmp:
        prompts = {f"run {i}": relay_text for i in range(RUNS + 1)} | {"warm": "warm up"}
        fake.responder = _responder(prompts)
        raw_rate(fake, "warm", len("warm up"))
        raw = statistics.median(raw_rate(fake, f"run {i}", deltas) for i in range(RUNS))
        server = ServerProcess.in_folder(Path(tmp), fake, async_mode=async_mode).start()
        try:
            client = EventClient(server.url).connect()
            relay_rate(client, "warm", len("warm up"))
            relayed = statistics.median(relay_rate(client, f"run {i}", deltas) for i in range(RUNS))
            client.disconnect()
            fan = fan_out(server.url, fake, conversations, conversation_deltas)
        finally:
            server.stop()
    ratio = relayed / raw
    relay_ok = ratio >= GOAL_RATIO
    fan_ok = fan.lost == 0 and fan.gaps == 0 and fan.wrong_text == 0
    print(f"async mode {async_mode}; {deltas} deltas per stream; median of {RUNS} runs")
    print(f"raw (openai client)        {raw:10.0f} deltas/s")
    print(f"relayed (Socket.IO client) {relayed:10.0f} tokens/s")
    print(
        f"ratio relayed/raw          {ratio:10.2f}   goal >= {GOAL_RATIO}   "
        f"{'PASS' if relay_ok else 'FAIL'}"
    )
    print(
        f"{conversations} concurrent conversations x {conversation_deltas} deltas over "
        f"{CLIENTS} connections: {fan.events} events in {fan.seconds:.2f}s = "
        f"{fan.events / fan.seconds:.0f} events/s"
    )
    print(
        f"  lost tokens {fan.lost}, seq gaps {fan.gaps}, wrong texts {fan.wrong_text}   "
        f"{'PASS' if fan_ok else 'FAIL'}"
    )
    return relay_ok and fan_ok


def main() -> int:
    """Entry point; exit code 1 when a goal was missed."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--deltas", type=int, default=4000)
    parser.add_argument("--conversations", type=int, default=50)
    parser.add_argument(
        "--conversation-deltas",
        type=int,
        default=1000,
        help="deltas each concurrent conversation streams",
    )
    parser.add_argument("--async-mode", choices=["threading", "eventlet"], default="threading")
    args = parser.parse_args()
    ok = run(args.deltas, args.conversations, args.conversation_deltas, args.async_mode)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
