"""Undo benchmark: what a task journal adds to `run_command("true")` in a big workspace.

Run from the repo root: `python bench/undo.py [--check] [--runs N] [--dir DIR]`.
Builds an empty workspace and ones of 2,000 and 20,000 files (1-6 KB, a few of 1 MB; about
80 MB for 20,000) in nested folders, then times the tool call through the real registry
with a task journal, each time in a fresh process:
- the first command ever, with no index or blobs yet: at once (the journal must copy the
  workspace first; reported only), and as the fronts run it, the baseline child started
  when the workspace is opened and finished before the command (its time is printed: the
  model must think that long first, else the command waits for the rest);
- the first command of a later process (the index an earlier one left), and a second
  command in the same process.
The added seconds are over the empty workspace in the same run (medians); the undo
journal's own share (the snapshot before) is shown beside them, and the scan after the
command, which runs behind its result while the model reads it, apart; since the command
runner's own timing varies by tens of ms, with the CPU time it took. Files go to /dev/shm
when there is one. The load average is printed: on a busy machine every figure grows.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

MAX_ADDED_SECONDS = 0.2
SIZES = (0, 2_000, 20_000)
_BIG_FILES = 8  # of 1 MB each, in the 20,000-file workspace
_FILES_PER_FOLDER = 100


def build(root: Path, count: int) -> int:
    """Make `count` files under `root` in nested folders, dated a minute ago; total bytes."""
    rng = random.Random(count)
    root.mkdir(parents=True)
    total = 0
    for i in range(count):
        folder = root / f"pkg{i // 1000:02}" / f"sub{i // _FILES_PER_FOLDER % 10}"
        if i % _FILES_PER_FOLDER == 0:
            folder.mkdir(parents=True, exist_ok=True)
        size = (1 << 20) if i < _BIG_FILES * count // 20_000 else rng.randint(1024, 6 * 1024)
        data = rng.randbytes(size)
        (folder / f"file{i:05}.dat").write_bytes(data)
        total += size
    past = time.time() - 60  # older than the racy window, as a workspace usually is
    for path in root.rglob("*"):
        os.utime(path, (past, past), follow_symlinks=False)
    return total


class _Timed:
    """A task journal that adds up the seconds its snapshot and comparison take, in wall
    time and in CPU time of the calling thread (which a busy machine inflates less)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.seconds = 0.0
        self.cpu = 0.0

    def snapshot(self) -> Any:
        return self._timed(self.inner.snapshot)

    def record_changes_later(self, snapshot: Any) -> None:
        self._timed(lambda: self.inner.record_changes_later(snapshot))

    def _timed(self, action: Callable[[], Any]) -> Any:
        started, cpu = time.perf_counter(), time.thread_time()
        try:
            return action()
        finally:
            self.seconds += time.perf_counter() - started
            self.cpu += time.thread_time() - cpu


def child(workspace: Path, data_dir: Path, baseline: bool) -> None:
    """In a fresh process: time two `run_command("true")` calls; print them as JSON.

    Between them it waits for the scan after the first, as the model's turn does (that scan
    runs behind the command's result; its remaining seconds are printed apart).

    With `baseline`, the journal's baseline child runs first, as when a front opens the
    workspace, and the commands come once it is done (its seconds are printed too).
    """
    from modules.undo.journal import UndoJournal
    from tests.kit.tools import call, make_ctx

    ctx = make_ctx(workspace.parent)
    journal = UndoJournal(data_dir, ctx.workspace)
    got: dict[str, float] = {}
    if baseline:
        started = time.perf_counter()
        journal.start_baseline()
        journal.baseline.wait()
        got["baseline"] = time.perf_counter() - started
    timed = _Timed(journal.task("bench", f"t{time.time_ns()}"))
    ctx.journal = timed  # type: ignore[assignment]
    for key in ("first", "second"):
        timed.seconds = timed.cpu = 0.0
        started = time.perf_counter()
        result = call(ctx, "run_command", command="true")
        got[key] = time.perf_counter() - started
        got[f"{key}_journal"] = timed.seconds
        got[f"{key}_cpu"] = timed.cpu
        assert result.ok, result.output
        behind = time.perf_counter()
        journal.settle()  # the scan after the command, while the model reads its result
        got[f"{key}_behind"] = time.perf_counter() - behind
    print(json.dumps(got))


def _spawn(base: Path, baseline: bool = False) -> dict[str, float]:
    """Run `child` in a new interpreter for the workspace `base/ws`, data in `base/data`."""
    argv = [sys.executable, __file__, "--child", str(base / "ws"), str(base / "data")]
    out = subprocess.run(
        argv + (["--baseline"] if baseline else []),
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def _fresh_data(base: Path) -> None:
    shutil.rmtree(base / "data", ignore_errors=True)
    (base / "data").mkdir()


def measure(base: Path, runs: int) -> dict[str, float]:
    """The first command ever (at once; after the baseline), then the medians of `runs`
    fresh processes with an index."""
    _fresh_data(base)
    cold = _spawn(base)["first"]
    _fresh_data(base)
    built = _spawn(base, baseline=True)
    samples = [_spawn(base) for _ in range(runs)]
    got = {key: statistics.median(s[key] for s in samples) for key in samples[0]}
    return {
        "cold": cold,
        "baseline": built["baseline"],
        "after_baseline": built["first"],
        "after_baseline_journal": built["first_journal"],
        "after_baseline_cpu": built["first_cpu"],
        "after_baseline_behind": built["first_behind"],
        **got,
    }


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def report(results: dict[int, dict[str, float]], megabytes: dict[int, float]) -> bool:
    """Print the figures and verdicts; True when every expectation held."""
    empty = results[0]
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(
        f"empty workspace: first command {empty['after_baseline']:.3f} s, new process "
        f"{empty['first']:.3f} s, later {empty['second']:.3f} s per run_command('true')"
    )
    ok = True
    for count in SIZES[1:]:
        got = results[count]
        print(f"\n{count:,} files ({megabytes[count]:.0f} MB)")
        print(
            f"  first command ever, at once (copies the workspace first)  "
            f"+{got['cold'] - empty['cold']:6.3f} s  (one-time, not judged)"
        )
        print(
            f"  baseline child, from the workspace's opening to done      "
            f" {got['baseline']:6.3f} s  (in the background; not judged)"
        )
        rows = (
            ("after_baseline", "first command ever, once the baseline is done "),
            ("first", "first command of a new process               "),
            ("second", "a later command, same process                "),
        )
        for key, what in rows:
            added = got[key] - empty[key]
            good = added <= MAX_ADDED_SECONDS
            ok = ok and good
            print(
                f"  {what}  +{added:6.3f} s  expected <= +{MAX_ADDED_SECONDS} s  "
                f"{_verdict(good)}   (snapshot: {got[key + '_journal']:.3f} s, "
                f"CPU {got[key + '_cpu']:.3f} s; the scan after, behind the result: "
                f"{got[key + '_behind']:.3f} s)"
            )
    return ok


def run(runs: int, where: Path | None) -> bool:
    """Build the workspaces, measure each, print; True when every expectation held."""
    shm = Path("/dev/shm")
    parent = where or (shm if shm.is_dir() else None)
    with tempfile.TemporaryDirectory(dir=parent) as tmp:
        results, megabytes = {}, {}
        for count in SIZES:
            base = Path(tmp) / f"n{count}"
            megabytes[count] = build(base / "ws", count) / 1e6
            results[count] = measure(base, runs)
        return report(results, megabytes)


def main() -> int:
    """Entry point; exit code 1 only with --check and a failed expectation."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if an expectation fails")
    parser.add_argument("--runs", type=int, default=5, help="fresh processes per workspace")
    parser.add_argument("--dir", type=Path, help="where to build (default /dev/shm)")
    parser.add_argument("--child", nargs=2, type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--baseline", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        workspace, data_dir = args.child
        child(workspace, data_dir, args.baseline)
        return 0
    ok = run(args.runs, args.dir)
    return 1 if args.check and not ok else 0


if __name__ == "__main__":
    sys.exit(main())
