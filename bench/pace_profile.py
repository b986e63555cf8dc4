"""py-spy for bench/pace.py: record the server while it relays, then group its frames into
model stream reading, the loop, logging, serialisation and the websocket send."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

GROUPS: list[tuple[str, tuple[str, ...]]] = [
    (
        "model stream reading (sse_pump, stream_reading, api_client)",
        ("model/sse_pump.py", "model/stream_reading.py", "model/api_client.py"),
    ),
    (
        "SDK / HTTP read (openai, httpx2, httpcore2)",
        ("/openai/", "/httpx2/", "/httpcore2/", "/httpx/", "/httpcore/", "/h11/"),
    ),
    ("event serialisation (protocol/events.py to_wire)", ("protocol/events.py",)),
    ("logging (utils/logger.py)", ("utils/logger.py",)),
    ("agent loop (core/)", ("/core/",)),
    ("other project code (utils/, modules/, web_*)", ("/utils/", "/modules/", "web_")),
    ("Socket.IO / engine.io emit", ("/socketio/", "/flask_socketio/", "/engineio/")),
    (
        "websocket send (simple_websocket, wsproto, eventlet ws)",
        ("/simple_websocket/", "/wsproto/", "websocket"),
    ),
    ("eventlet hub / green threads", ("/eventlet/", "/greenlet/")),
    ("werkzeug / flask", ("/werkzeug/", "/flask/")),
]


def _frame_file(frame: str) -> str:
    return frame[frame.rfind("(") + 1 :].rsplit(":", 1)[0] if "(" in frame else frame


def _function(frame: str) -> str:
    """`name (path)` without the line number, the path shortened to the last 3 parts."""
    name = frame[: frame.rfind(" (")] if " (" in frame else frame
    path = _frame_file(frame)
    return f"{name} ({'/'.join(Path(path).parts[-3:])})"


def _group(frame: str) -> str | None:
    path = _frame_file(frame)
    for group, needles in GROUPS:
        if any(needle in path for needle in needles):
            return group
    return None


def summarise_py_spy(path: Path, top: int = 15) -> None:
    """Top functions by self and cumulative samples, and each group's share."""
    self_samples: Counter[str] = Counter()
    cumulative: Counter[str] = Counter()
    owned: Counter[str] = Counter()  # innermost known group of each sample
    inside: Counter[str] = Counter()  # samples with the group anywhere in the stack
    total = 0
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = stack.split(";")
        total += count
        self_samples[_function(frames[-1])] += count
        for name in {_function(f) for f in frames}:
            cumulative[name] += count
        groups = [_group(f) for f in frames]
        owned[next((g for g in reversed(groups) if g), "other (stdlib, threading)")] += count
        for group in {g for g in groups if g}:
            inside[group] += count
    if not total:
        print(f"  {path}: no samples")
        return
    print(f"  py-spy {path}: {total} on-CPU samples")
    for title, counter in (("self", self_samples), ("cumulative", cumulative)):
        print(f"  top {top} by {title}:")
        for name, count in counter.most_common(top):
            print(f"    {100 * count / total:5.1f}%  {name}")
    print(
        "  by group (self: innermost project/library frame owns its stdlib callees; "
        "in-stack: anywhere in the stack):"
    )
    for group, count in owned.most_common():
        print(
            f"    self {100 * count / total:5.1f}%  in-stack "
            f"{100 * inside.get(group, 0) / total:5.1f}%  {group}"
        )


def start_py_spy(pid: int, out: Path, seconds: float) -> subprocess.Popen[bytes] | None:
    exe = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(exe).exists():
        print(f"  py-spy not found ({exe}); no profile", flush=True)
        return None
    argv = [
        exe,
        "record",
        "--gil",
        "-r",
        "997",  # prime: no aliasing with the 10 ms pace or a periodic flush
        "-f",
        "raw",
        "-o",
        str(out),
        "-p",
        str(pid),
        "-d",
        str(max(1, int(seconds))),
    ]
    return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
