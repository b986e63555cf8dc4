"""bench/page.py's figures: one run's results, the page's main-thread tasks read from a
Chromium trace, and the report with its goals."""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from typing import Any

GOAL_RATIO = 1.25
GOAL_TASK_MS = 50.0


# --- measuring ------------------------------------------------------------------------------


@dataclass
class Run:
    socket_ms: float
    render_ms: float
    longest_task_ms: float
    longest_task_cpu_ms: float
    main_cpu_ms: float
    same_as_one_shot: bool
    tokens: int
    history_ms: float
    history_task_ms: float
    history_task_cpu_ms: float
    history_same: bool

    @property
    def ratio(self) -> float:
        return self.render_ms / self.socket_ms


def main_thread_tasks(trace: bytes, since_ms: float) -> list[tuple[float, float]]:
    """(wall ms, CPU ms) of each task of the page's main thread ending after since_ms."""
    events = json.loads(trace)["traceEvents"]
    mains = {
        (e["pid"], e["tid"])
        for e in events
        if e.get("name") == "thread_name" and e["args"].get("name") == "CrRendererMain"
    }
    tasks = [
        e
        for e in events
        if e.get("name") == "ThreadControllerImpl::RunTask"
        and e.get("ph") == "X"
        and (e["pid"], e["tid"]) in mains
        and (e["ts"] + e["dur"]) / 1000 >= since_ms
    ]
    busiest = max(mains, key=lambda m: sum(t["dur"] for t in tasks if (t["pid"], t["tid"]) == m))
    return [
        (t["dur"] / 1000, t.get("tdur", t["dur"]) / 1000)
        for t in tasks
        if (t["pid"], t["tid"]) == busiest
    ]


def mark_ms(trace: bytes, name: str) -> float:
    """When the page made performance.mark(name), on the trace's clock (ms)."""
    return min(e["ts"] for e in json.loads(trace)["traceEvents"] if e.get("name") == name) / 1000


# --- reporting ------------------------------------------------------------------------------


def print_run(n: int, name: str, run: Run) -> None:
    """One progress line per run of a variant."""
    print(
        f"  run {n + 1} {name:<14} ratio {run.ratio:.2f}x  socket "
        f"{run.socket_ms:.0f} ms ({run.tokens} token frames)  longest task "
        f"wall {run.longest_task_ms:.0f} ms cpu {run.longest_task_cpu_ms:.0f} ms"
        f"  history task wall {run.history_task_ms:.0f} ms "
        f"cpu {run.history_task_cpu_ms:.0f} ms",
        flush=True,
    )


def summary(name: str, runs: list[Run]) -> str:
    """Two lines per variant: medians over the runs, and the worst task of any run."""

    def median(values: Any) -> float:
        return statistics.median(values)

    def yes(values: Any) -> str:
        return "yes" if all(values) else "NO"

    return (
        f"{name:<14} socket {median(r.socket_ms for r in runs):6.0f} ms  "
        f"render {median(r.render_ms for r in runs):6.0f} ms  "
        f"ratio {median(r.ratio for r in runs):4.2f}x  "
        f"longest task wall {max(r.longest_task_ms for r in runs):4.0f} ms "
        f"cpu {max(r.longest_task_cpu_ms for r in runs):4.0f} ms  "
        f"main-thread cpu {median(r.main_cpu_ms for r in runs):5.0f} ms  "
        f"one-shot identical {yes(r.same_as_one_shot for r in runs)}\n"
        f"{'':<14} history: shown {median(r.history_ms for r in runs):5.0f} ms after load  "
        f"longest task wall {max(r.history_task_ms for r in runs):4.0f} ms "
        f"cpu {max(r.history_task_cpu_ms for r in runs):4.0f} ms  "
        f"one-shot identical {yes(r.history_same for r in runs)}"
    )


def print_report(results: dict[str, list[Run]], bare: list[float]) -> bool:
    """The summary of each variant, the page against the bare client, and the verdict on the
    "incremental" variant; returns whether it met the goals."""
    for name, runs in results.items():
        print(summary(name, runs))
    new = results["incremental"]
    ratio = statistics.median(r.ratio for r in new)
    longest = max(max(r.longest_task_cpu_ms, r.history_task_cpu_ms) for r in new)
    bare_ratio = statistics.median(r.render_ms for r in new) / statistics.median(bare)
    print(
        f"tokens reach a bare Socket.IO client in {statistics.median(bare):.0f} ms (median): "
        f"the page shows the answer in {bare_ratio:.2f}x that"
    )
    ok = (
        ratio <= GOAL_RATIO
        and longest <= GOAL_TASK_MS
        and all(r.same_as_one_shot and r.history_same for r in new)
    )
    print(
        f"goal {'met' if ok else 'MISSED'}: ratio {ratio:.2f}x (<= {GOAL_RATIO}), "
        f"longest task {longest:.0f} ms of CPU (<= {GOAL_TASK_MS:.0f}), streaming or history"
    )
    return ok
