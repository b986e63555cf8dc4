"""History benchmark: appending stays flat at 10,000 messages; context building stays fast.

Run from the repo root: `python bench/history.py [--check] [--messages N]`.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from history.context_builder import ContextBuilder
from history.conversation import Conversation
from history.store import ConversationStore
from protocol.records import ToolCallRecord

SAMPLES = 20
MAX_APPEND_RATIO = 1.5
MAX_BUILD_MS = 20.0


def _step(conv: Conversation, i: int) -> None:
    """Append the i-th message of a realistic mix: question, tool call, result, answer."""
    kind = i % 4
    if kind == 0:
        conv.append("user", f"Question {i}: " + "please look at the code " * 6)
    elif kind == 1:
        call: ToolCallRecord = {
            "id": f"call_{uuid.uuid4().hex[:12]}",
            "type": "function",
            "function": {"name": "read_file", "arguments": '{"path": "src/app.py"}'},
        }
        conv.append("assistant", "", reasoning_content="Read it first. " * 5, tool_calls=[call])
    elif kind == 2:
        leaf = conv.leaf_id
        assert leaf is not None  # the call appended just before
        call_id = conv.get(leaf)["tool_calls"][0]["id"]
        conv.append(
            "tool", "def main():\n    return 42\n" * 20, tool_call_id=call_id, name="read_file"
        )
    else:
        conv.append("assistant", f"Answer {i}: " + "the function returns 42. " * 10)


def _timed(action: Callable[[], Any]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def _measure_appends(conv: Conversation, messages: int) -> tuple[float, float]:
    """Median append time (ms) around the first and around the `messages`-th record."""
    first = [_timed(partial(_step, conv, i)) for i in range(SAMPLES)]
    for i in range(SAMPLES, messages):
        _step(conv, i)
    late = [_timed(partial(_step, conv, i)) for i in range(messages, messages + SAMPLES)]
    return statistics.median(first) * 1000, statistics.median(late) * 1000


def _measure_builds(conv: Conversation, window: int) -> tuple[float, float]:
    """Cold build (fresh builder) and the median steady-state build as the conversation grows."""
    cold = _timed(lambda: ContextBuilder(window).build("system prompt", conv.path()))
    builder = ContextBuilder(window)
    builder.build("system prompt", conv.path())
    steady = []
    for _ in range(SAMPLES):
        _step(conv, len(conv))
        steady.append(_timed(lambda: builder.build("system prompt", conv.path())))
    return cold * 1000, statistics.median(steady) * 1000


def run(messages: int) -> bool:
    """Run the measurements, print them and return whether every expectation held."""
    with tempfile.TemporaryDirectory(prefix="history-bench-") as tmp:
        conv = ConversationStore(Path(tmp)).create(title="bench")
        early_ms, late_ms = _measure_appends(conv, messages)
        size = len(conv)
        reload_ms = _timed(lambda: ConversationStore(Path(tmp)).get(conv.id)) * 1000
        cold_ms, build_ms = _measure_builds(conv, 10_000_000)  # everything fits: the worst case
        _, small_ms = _measure_builds(conv, 128_000)

    ratio = late_ms / early_ms
    append_ok, build_ok = ratio <= MAX_APPEND_RATIO, build_ms <= MAX_BUILD_MS
    print(f"append, messages 1-{SAMPLES} (median)          {early_ms:8.3f} ms")
    print(f"append, messages {messages}-{messages + SAMPLES} (median)  {late_ms:8.3f} ms")
    print(
        f"append ratio late/early                 {ratio:8.2f}     "
        f"expected <= {MAX_APPEND_RATIO}   {_verdict(append_ok)}"
    )
    print(
        "  (an append writes one line; meta.json's updated_at is rewritten at most once a second)"
    )
    print(f"reload a {size}-message conversation   {reload_ms:8.1f} ms")
    print(
        f"build context, ~{size} messages, all fit (median of {SAMPLES}, path + build, "
        f"one message appended before each) {build_ms:.2f} ms  "
        f"expected <= {MAX_BUILD_MS:.0f} ms   {_verdict(build_ok)}"
    )
    print(f"build context, same, 128k window (median)  {small_ms:8.2f} ms")
    print(f"build context, fresh builder, nothing cached yet  {cold_ms:8.1f} ms  (for information)")
    return append_ok and build_ok


def main() -> int:
    """Entry point; exit code 1 only with --check and a failed expectation."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="exit 1 if an expectation fails")
    parser.add_argument("--messages", type=int, default=10_000, help="conversation length")
    args = parser.parse_args()
    ok = run(max(args.messages, SAMPLES))
    return 1 if args.check and not ok else 0


if __name__ == "__main__":
    sys.exit(main())
