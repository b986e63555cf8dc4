"""Session benchmark: a command in a conversation's existing sandbox session against the same
command in a fresh bubblewrap sandbox (as every command ran before sessions), with the ratio;
with --docker IMAGE, a command in a Docker session against one in a warm container of the
pool (as Docker commands ran before sessions).

Run from the repo root: `python bench/session_start.py [--runs N] [--docker IMAGE]`. Commands:
`true` and `python -c pass`, each run N times both ways; also what starting a session costs
(bubblewrap: with network off and outbound, slirp4netns's share).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from modules.sandbox.factory import build_runner, runner_for, sessions_of
from modules.sandbox.runner import CommandResult, CommandRunner
from modules.sandbox.session.session import SandboxSession
from modules.sandbox.session.session_runner import SessionRunner
from utils.cancel import CancelToken
from utils.settings import Settings


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


def _compare(fresh: CommandRunner, runner: CommandRunner, ws: Path, runs: int, python: str) -> None:
    """Start a session, then each command `runs` times fresh and in the session."""
    sessions = sessions_of(runner)
    assert sessions is not None
    started = time.perf_counter()
    session = sessions.session("bench")
    start_ms = (time.perf_counter() - started) * 1000
    print(f"starting a session (its sandbox and supervisor): {start_ms:.1f} ms, once")
    print(f"{'command':<18} {'fresh ms':>9} {'session ms':>11} {'p90 fresh':>10} "
          f"{'p90 session':>12} {'ratio':>7}   (n)")  # fmt: skip
    for argv in (["true"], [python, "-c", "pass"]):
        _timed(session, argv, ws, 2)  # the first command's page cache, both ways
        _timed(fresh, argv, ws, 2)
        in_fresh = _timed(fresh, argv, ws, runs)
        in_session = _timed(session, argv, ws, runs)
        median_fresh, median_session = map(statistics.median, (in_fresh, in_session))
        p90 = [sorted(t)[int(len(t) * 0.9) - 1] for t in (in_fresh, in_session)]
        print(f"{' '.join(argv):<18} {median_fresh:>9.1f} {median_session:>11.1f} "
              f"{p90[0]:>10.1f} {p90[1]:>12.1f} {median_fresh / median_session:>6.1f}x"
              f"   ({runs})")  # fmt: skip


def _session_start_ms(settings: Settings, starts: int) -> float:
    """The median time to start a session with these settings."""
    runner = runner_for(settings)
    sessions = sessions_of(runner)
    assert sessions is not None
    times = []
    try:
        for n in range(starts):
            started = time.perf_counter()
            sessions.session(f"start-{n}")
            times.append((time.perf_counter() - started) * 1000)
            sessions.end(f"start-{n}", "session_idle")
    finally:
        runner.close()
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--docker", metavar="IMAGE", help="compare Docker too, with this image")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp, "ws")
        ws.mkdir()
        settings = Settings(workspace=ws, data_dir=Path(tmp, "data"), sandbox="local")
        fresh = build_runner(settings)
        if fresh.kind != "bubblewrap":
            print("bubblewrap is not installed or unusable here: nothing to compare")
            return 1
        print("bubblewrap: a fresh sandbox per command against the conversation's session")
        runner = runner_for(settings)
        try:
            _compare(fresh, runner, ws, args.runs, "python3")
        finally:
            runner.close()
        for network in ("off", "outbound"):
            with_network = settings.model_copy(update={"session_network": network})
            ms = _session_start_ms(with_network, 10)
            print(f"starting a bubblewrap session, network {network}: {ms:.1f} ms (median of 10)")
        if args.docker:
            _docker(args.docker, ws, Path(tmp, "data"), args.runs)
    return 0


def _docker(image: str, ws: Path, data: Path, runs: int) -> None:
    """A command in a warm container of the pool (as Docker commands ran before sessions)
    against the conversation's Docker session."""
    if os.geteuid() == 0:
        os.chown(ws, 1000, 1000)  # the commands' user, as root
    docker = {"image": image, "pool_size": 2, "python": "python"}
    settings = Settings(workspace=ws, data_dir=data, sandbox="docker", docker=docker)
    runner = runner_for(settings)
    print(f"Docker ({image}): a command in a warm container of the pool against the session")
    try:
        assert isinstance(runner, SessionRunner)
        pool = getattr(runner.fresh, "pool", None)
        if pool is not None:
            pool.wait_ready(60)
        _compare(runner.fresh, runner, ws, runs, "python")
    finally:
        runner.close()


if __name__ == "__main__":
    sys.exit(main())
