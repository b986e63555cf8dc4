"""Start-up benchmark: the wall time of `main.py cli -p` with a one-line answer.

Run from the repo root: `python bench/startup.py [--runs 10]`.

The fake model API runs in this process (echo replies); `main.py cli -p hi --approval auto`
runs `--runs` times as a subprocess against it, in fresh temporary folders. The same number
of runs of `python -c pass`, `python -c "import openai"` and a bare SDK script making the same
one streamed request (`BARE_REQUEST`: client, request, the HTTP stack it imports) are timed in
the same run as baselines, all taking turns: the machine is shared, so compare the ratios, not
the absolute times. One more run under `-X importtime` gives the ten imports that cost the most
(cumulative). The goal (issue 27) is a ratio measured in the same run: the median of
`cli -p` at most GOAL_RATIO times the median of `import openai`; the last line prints PASS
or FAIL, and the exit status is 1 when the goal is missed. Bytecode is written
(PYTHONDONTWRITEBYTECODE dropped): a user's second start reads its `__pycache__`, and so
do the timed runs after the warm-up.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.fake_llm import FakeLLM, echo_responder

ROOT = Path(__file__).resolve().parent.parent
GOAL_RATIO = 1.15  # cli -p ÷ import openai
# What any program that sends one chat request with the SDK does, and no more.
BARE_REQUEST = """
import os, openai
client = openai.OpenAI(base_url=os.environ["AGENT_BASE_URL"], api_key=os.environ["AGENT_API_KEY"])
stream = client.chat.completions.create(
    model=os.environ["AGENT_MODEL"], messages=[{"role": "user", "content": "hi"}], stream=True
)
print("".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices))
"""
TOP = 10
_IMPORT_LINE = re.compile(r"^import time:\s+(\d+)\s+\|\s+(\d+)\s+\|( *)(\S+)\s*$")


@dataclass(frozen=True)
class Timing:
    """Wall times of one command, in seconds."""

    label: str
    times: list[float]

    @property
    def median(self) -> float:
        return statistics.median(self.times)

    @property
    def p90(self) -> float:
        ordered = sorted(self.times)
        return ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]


def _cli_command(tmp: Path, run: int) -> list[str]:
    (tmp / f"ws{run}").mkdir(exist_ok=True)
    return [
        sys.executable,
        "main.py",
        "cli",
        "--workspace",
        str(tmp / f"ws{run}"),
        "--data-dir",
        str(tmp / f"data{run}"),
        "-p",
        "hi",
        "--approval",
        "auto",
    ]


def _environment(fake: FakeLLM) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("AGENT_") and k != "PYTHONDONTWRITEBYTECODE"
    }
    env.update(
        AGENT_PROVIDER="custom",
        AGENT_BASE_URL=fake.base_url,
        AGENT_API_KEY=fake.api_key,
        AGENT_MODEL=fake.model,
    )
    return env


def _run(label: str, command: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{label} failed ({done.returncode}):\n{done.stderr}")
    return elapsed


def _time_interleaved(
    commands: dict[str, Callable[[int], list[str]]], runs: int, env: dict[str, str]
) -> list[Timing]:
    """Each run times every command once, one after the other: a load that comes and goes on
    the shared machine weighs on all of them alike, and the ratios hold."""
    times: dict[str, list[float]] = {label: [] for label in commands}
    for run in range(runs):
        for label, command in commands.items():
            times[label].append(_run(label, command(run), env))
    return [Timing(label, samples) for label, samples in times.items()]


def top_imports(stderr: str, count: int = TOP) -> list[tuple[int, int, str]]:
    """The `count` costliest imports, one per top-level package (its costliest: `openai`, not
    the dozen `openai.types...` nested in it): (cumulative µs, self µs, name)."""
    best: dict[str, tuple[int, int, str]] = {}
    for line in stderr.splitlines():
        match = _IMPORT_LINE.match(line)
        if match:
            row = (int(match.group(2)), int(match.group(1)), match.group(4))
            package = row[2].split(".")[0]
            best[package] = max(best.get(package, row), row)
    return sorted(best.values(), reverse=True)[:count]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()

    with FakeLLM("deepseek") as fake, tempfile.TemporaryDirectory(prefix="startup-") as name:
        fake.responder = echo_responder()
        tmp = Path(name)
        env = _environment(fake)
        _run("warm-up", _cli_command(tmp, -1), env)  # page cache, __pycache__
        timings = _time_interleaved(
            {
                "python -c pass": lambda _: [sys.executable, "-c", "pass"],
                "python -c 'import openai'": lambda _: [sys.executable, "-c", "import openai"],
                "bare SDK request": lambda _: [sys.executable, "-c", BARE_REQUEST],
                "main.py cli -p hi": lambda run: _cli_command(tmp, run),
            },
            args.runs,
            env,
        )
        profiled = subprocess.run(
            [sys.executable, "-X", "importtime", *_cli_command(tmp, args.runs)[1:]],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
        )

    base = timings[0].median
    print(f"{'command':<28} {'median':>8} {'p90':>8} {'x python':>9}   ({args.runs} runs)")
    for timing in timings:
        print(
            f"{timing.label:<28} {timing.median:>7.3f}s {timing.p90:>7.3f}s "
            f"{timing.median / base:>8.1f}x"
        )
    cli = timings[-1]
    print(
        f"\ntop {TOP} imports of one cli -p run (-X importtime, cumulative, "
        "the costliest per top-level package):"
    )
    for cumulative, own, module in top_imports(profiled.stderr):
        print(f"  {cumulative / 1000:>8.1f} ms  (self {own / 1000:>6.1f} ms)  {module}")
    print(
        f"\ncli -p / bare SDK request: {cli.median / timings[2].median:.2f}x "
        "(for reference: the same request with nothing of ours)"
    )
    ratio = cli.median / timings[1].median
    verdict = "PASS" if ratio <= GOAL_RATIO else "FAIL"
    print(f"\ngoal: cli -p / import openai <= {GOAL_RATIO:.2f}x: {ratio:.2f}x -> {verdict}")
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
