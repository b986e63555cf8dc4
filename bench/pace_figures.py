"""bench/pace.py's figures: CPU from /proc, latency stamps, one run's results, the table."""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from pathlib import Path

GOAL_CPU_US = 100.0
GOAL_AT = 50  # the conversation count the latency and loss goals are set for
GOAL_P50_MS = 5.0
GOAL_P99_MS = 50.0
TICKS = os.sysconf("SC_CLK_TCK")


# --- measuring ------------------------------------------------------------------------------


def _stat_ticks(pid: int) -> tuple[int, int, list[int]]:
    """(utime+cutime, stime+cstime) of one process, and its live children's pids."""
    text = Path(f"/proc/{pid}/stat").read_text()
    fields = [int(v) for v in text[text.rindex(")") + 2 :].split()[11:15]]  # proc(5) 14..17
    user, system = fields[0] + fields[2], fields[1] + fields[3]
    children: list[int] = []
    with contextlib.suppress(OSError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(OSError):
                children += [int(c) for c in (task / "children").read_text().split()]
    return user, system, children


def cpu_times(pid: int) -> tuple[float, float]:
    """(user, system) CPU seconds of a process and its descendants (reaped ones included)."""
    user = system = seen = 0
    pending = [pid]
    while pending and seen < 10_000:
        seen += 1
        with contextlib.suppress(OSError, ValueError):
            u, s, children = _stat_ticks(pending.pop())
            user, system = user + u, system + s
            pending += children
    return user / TICKS, system / TICKS


def cpu_seconds(pid: int) -> float:
    """CPU seconds of a process and its descendants."""
    return sum(cpu_times(pid))


def own_cpu() -> float:
    times = os.times()
    return times.user + times.system


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


class Stamps:
    """Cuts a conversation's text into `<ns>;` stamps, noting each one's arrival."""

    def __init__(self) -> None:
        self.buffer = ""
        self.latencies_ms: list[float] = []
        self.bad = 0

    def feed(self, text: str, arrived_ns: int) -> None:
        self.buffer += text
        if ";" not in self.buffer:
            return
        *complete, self.buffer = self.buffer.split(";")
        for stamp in complete:
            try:
                self.latencies_ms.append((arrived_ns - int(stamp)) / 1e6)
            except ValueError:
                self.bad += 1


@dataclass
class Run:
    """What one N in one setting measured."""

    label: str
    conversations: int
    expected: int
    received: int = 0
    gaps: int = 0
    unfinished: int = 0
    bad: int = 0
    latencies_ms: list[float] = field(default_factory=list)
    ack_ms: list[float] = field(default_factory=list)  # send_message asked -> acknowledged
    start_spread_s: float = 0.0  # from the first conversation's first token to the last's
    seconds: float = 0.0
    server_cpu: float | None = None
    server_sys: float = 0.0  # the part of server_cpu spent in the kernel
    fake_cpu: float = 0.0
    bench_cpu: float = 0.0

    @property
    def lost(self) -> int:
        return self.expected - self.received

    def cpu_us_per_token(self, cpu: float | None) -> float:
        return float("nan") if cpu is None or not self.received else cpu / self.received * 1e6


# --- reporting -------------------------------------------------------------------------------


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


HEADER = (
    f"{'setting':<10}{'N':>4}{'tokens':>8}{'/s/conv':>8}{'p50 ms':>9}{'p99 ms':>9}{'max ms':>9}"
    f"{'lost':>6}{'gaps':>5}{'server':>8}{'fake':>7}{'x fake':>7}{'client':>8}{'machine':>8}"
)
UNITS = f"{'':<10}{'':>4}{'':>8}{'':>8}{'':>9}{'':>9}{'':>9}{'':>6}{'':>5}" + (
    f"{'us/tok':>8}{'us/tok':>7}{'':>7}{'us/tok':>8}{'busy %':>8}"
)


def print_run(run: Run) -> bool:
    """One table line; returns whether the goals that apply to it were met."""
    lat = run.latencies_ms
    p50, p99, worst = percentile(lat, 50), percentile(lat, 99), max(lat, default=float("nan"))
    per_conv = run.received / run.conversations / run.seconds if run.seconds else 0.0
    server_us = run.cpu_us_per_token(run.server_cpu)
    fake_us = run.cpu_us_per_token(run.fake_cpu)
    client_us = run.cpu_us_per_token(run.bench_cpu)
    ratio = server_us / fake_us if fake_us else float("nan")
    busy = (run.server_cpu or 0) + run.fake_cpu + run.bench_cpu
    busy_pct = 100 * busy / run.seconds / (os.cpu_count() or 1) if run.seconds else 0.0
    print(
        f"{run.label:<10}{run.conversations:>4}{run.received:>8}{per_conv:>8.1f}{p50:>9.2f}"
        f"{p99:>9.2f}{worst:>9.1f}{run.lost:>6}{run.gaps:>5}{server_us:>8.0f}{fake_us:>7.0f}"
        f"{ratio:>7.2f}{client_us:>8.0f}{busy_pct:>8.0f}"
    )
    if run.unfinished or run.bad:
        print(f"    {run.unfinished} conversations without done, {run.bad} unreadable stamps")
    if run.ack_ms:
        print(
            f"    started at once: send_message acks p50 {percentile(run.ack_ms, 50):.0f} ms, "
            f"max {max(run.ack_ms):.0f} ms; first tokens spread over {run.start_spread_s:.2f} s"
        )
    if run.server_cpu is None:
        return True
    cpu_ok = server_us <= GOAL_CPU_US
    lat_ok = p50 <= GOAL_P50_MS and p99 <= GOAL_P99_MS
    loss_ok = run.lost == 0 and run.gaps == 0 and run.unfinished == 0
    binding = run.conversations == GOAL_AT
    print(
        f"    server CPU/token {server_us:.0f} <= {GOAL_CPU_US:.0f} us {verdict(cpu_ok)}; "
        f"p50 {p50:.2f} <= {GOAL_P50_MS} ms, p99 {p99:.2f} <= {GOAL_P99_MS} ms "
        f"{verdict(lat_ok)}; lost {run.lost}, gaps {run.gaps} {verdict(loss_ok)}"
        f"{'' if binding else f'  (latency/loss goals: N={GOAL_AT}; informative here)'}"
    )
    busy_cpus, kernel_cpus = run.server_cpu / run.seconds, run.server_sys / run.seconds
    kernel_us = run.cpu_us_per_token(run.server_sys)
    print(
        f"    server: {busy_cpus:.2f} CPUs busy, {kernel_cpus:.2f} in the kernel ({kernel_us:.0f}"
        " us/token system time)"
    )
    return cpu_ok and (not binding or (lat_ok and loss_ok))
