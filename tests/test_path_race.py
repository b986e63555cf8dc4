"""A folder swapped with a symlink to an outside folder while the file tools run.

A child process exchanges `ws/dir` (a real folder) and `ws/swap` (a symlink to a folder
outside the workspace holding a secret) with renameat2(RENAME_EXCHANGE) in a tight loop;
meanwhile thousands of tool calls go through `dir`. None may read or change the outside.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from modules.undo.journal import UndoJournal
from tests.kit.tools import call, make_ctx, state

SECRET = "SECRET-7d1e9a-never-shown"
MARKER = "outside-only-marker.txt"
RUN_SECONDS = 6.0  # at least, and until MIN_CALLS calls were made (a busy machine is slower)
MIN_CALLS = 1000
MAX_SECONDS = 60.0

FLIPPER = r"""
import ctypes, os, platform, sys, time

libc = ctypes.CDLL(None, use_errno=True)
AT_FDCWD, RENAME_EXCHANGE = -100, 2
NUMBERS = {"x86_64": 316, "aarch64": 276, "riscv64": 276, "ppc64le": 357, "s390x": 347}
a, b, stop = (os.fsencode(x) for x in sys.argv[1:4])
seconds = float(sys.argv[4])


def exchange():
    if hasattr(libc, "renameat2"):
        return libc.renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE)
    number = NUMBERS.get(platform.machine())
    if number is None:
        return -1
    return libc.syscall(number, AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE)


if exchange() != 0 or exchange() != 0:
    print("refused", ctypes.get_errno(), flush=True)
    sys.exit(0)
print("ready", flush=True)
swaps, deadline = 0, time.monotonic() + seconds
while time.monotonic() < deadline and not os.path.exists(stop):
    for _ in range(200):
        exchange()
        swaps += 1
if swaps % 2:
    exchange()
    swaps += 1
print(swaps, flush=True)
"""


def _start_flipper(ws: Path, stop: Path) -> subprocess.Popen[str]:
    args = [sys.executable, "-c", FLIPPER, str(ws / "dir"), str(ws / "swap"), str(stop)]
    proc = subprocess.Popen([*args, str(MAX_SECONDS + 5)], stdout=subprocess.PIPE, text=True)
    first = proc.stdout.readline().strip() if proc.stdout else ""
    if first != "ready":
        proc.wait(timeout=10)
        pytest.skip(f"renameat2(RENAME_EXCHANGE) is not available here ({first or 'no answer'})")
    return proc


def _round(ctx, n: int) -> list[str]:
    """One round of tool calls through the swapped folder; their outputs."""
    results = [
        call(ctx, "read_file", path="dir/target.txt"),
        call(ctx, "create_file", path=f"dir/new-{n}.txt", content=f"new {n}\n"),
        call(ctx, "modify_file", path="dir/target.txt", operation="append", content="+"),
        call(ctx, "rename_file", old_path=f"dir/new-{n}.txt", new_path=f"dir/renamed-{n}.txt"),
        call(ctx, "delete_file", path=f"dir/renamed-{n}.txt"),
        call(ctx, "list_files", directory="dir"),
        call(ctx, "search_code", query=SECRET[:13]),
    ]
    return [r.output for r in results]


def test_tools_never_escape_through_a_swapped_folder(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    ctx.journal = UndoJournal(tmp_path / "data", ctx.workspace).task("conv-1", "task-1")
    ws = ctx.workspace.root
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "target.txt").write_text(SECRET + "\n")
    (outside / MARKER).write_text(SECRET + "\n")
    (ws / "dir").mkdir()
    (ws / "dir" / "target.txt").write_text("inside\n")
    (ws / "swap").symlink_to(outside)
    before = state(outside)
    stop = tmp_path / "stop-flipper"
    proc = _start_flipper(ws, stop)
    calls, leaks = 0, []
    try:
        started = time.monotonic()
        n = 0
        while (elapsed := time.monotonic() - started) < RUN_SECONDS or (
            calls < MIN_CALLS and elapsed < MAX_SECONDS
        ):
            for output in _round(ctx, n):
                calls += 1
                if SECRET in output or MARKER in output:
                    leaks.append(output[:300])
            n += 1
    finally:
        stop.touch()
        try:
            out, _ = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
    swaps = int(out.strip() or 0)
    changed_outside = state(outside) != before
    escapes = len(leaks) + int(changed_outside)
    print(f"\nrace: {calls} tool calls, {swaps} swaps, {escapes} escapes")
    assert swaps > 1000, "the flipper hardly ran"
    assert calls >= MIN_CALLS
    assert not leaks, leaks[:3]
    assert not changed_outside, sorted(set(state(outside)) ^ set(before))
    assert (ws / "dir").is_dir() and not (ws / "dir").is_symlink()
