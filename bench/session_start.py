"""Session benchmark: a command in a conversation's existing sandbox session against the same
command in a fresh bubblewrap sandbox (as every command ran before sessions), with the ratio.

Run from the repo root: `python bench/session_start.py [--runs N]`. Commands: `true` and
`python3 -c pass`, each run N times both ways; also what starting a session costs once.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from modules.sandbox.factory import build_runner, runner_for, sessions_of
from modules.sandbox.runner import CommandResult, CommandRunner
from modules.sandbox.session.session import SandboxSession
from utils.cancel import CancelToken
from utils.settings import Settings

COMMANDS = (["true"], ["python3", "-c", "pass"])


def _timed(
    where: CommandRunner | SandboxSession, argv: list[str], cwd: Path, runs: int
) -> list[float]:
    """Milliseconds per run of `argv`, start to result."""
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        result: CommandResult = where.run(
            argv, cwd=cwd, timeout=60, cancel=CancelToken(), on_output=lambda _: None
        )
        times.append((time.perf_counter() - started) * 1000)
        if result.exit_code != 0:
            raise SystemExit(f"{' '.join(argv)} failed: {result.output}")
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp, "ws")
        ws.mkdir()
        settings = Settings(workspace=ws, data_dir=Path(tmp, "data"), sandbox="local")
        fresh = build_runner(settings)
        if fresh.kind != "bubblewrap":
            print("bubblewrap is not installed or unusable here: nothing to compare")
            return 1
        runner = runner_for(settings)
        sessions = sessions_of(runner)
        assert sessions is not None
        try:
            started = time.perf_counter()
            session = sessions.session("bench")
            start_ms = (time.perf_counter() - started) * 1000
            print(f"starting a session (its sandbox and supervisor): {start_ms:.1f} ms, once")
            print(f"{'command':<18} {'fresh ms':>9} {'session ms':>11} {'p90 fresh':>10} "
                  f"{'p90 session':>12} {'ratio':>7}   (n)")  # fmt: skip
            for argv in COMMANDS:
                _timed(session, argv, ws, 2)  # the first command's page cache, both ways
                _timed(fresh, argv, ws, 2)
                in_fresh = _timed(fresh, argv, ws, args.runs)
                in_session = _timed(session, argv, ws, args.runs)
                median_fresh, median_session = map(statistics.median, (in_fresh, in_session))
                p90 = [sorted(t)[int(len(t) * 0.9) - 1] for t in (in_fresh, in_session)]
                print(f"{' '.join(argv):<18} {median_fresh:>9.1f} {median_session:>11.1f} "
                      f"{p90[0]:>10.1f} {p90[1]:>12.1f} {median_fresh / median_session:>6.1f}x"
                      f"   ({args.runs})")  # fmt: skip
        finally:
            runner.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
