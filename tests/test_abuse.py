"""Hostile commands through the real tools, in every sandbox this machine has.

Each test runs with a sentinel folder beside the workspace and checks that nothing outside
the workspace changed, that the command was stopped, and that the machine still answers.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from modules.sandbox.docker_runner import DockerRunner
from modules.sandbox.factory import build_runner
from modules.sandbox.local_runner import LocalRunner
from modules.tools.tool_context import ToolContext
from tests.kit.sandbox_image import SANDBOX_UID, build_test_image, docker_client_or_skip
from tests.kit.tools import call, make_ctx, snapshot
from tests.kit.waits import wait_until

TIMEOUT = 5
SLACK_SECONDS = 4.0  # kill grace, container kill and output drain on top of the timeout
MAX_PROBE_SECONDS = 2.0  # how long starting `true` may take while a command misbehaves
EXTRA_TASKS = 1500  # a contained fork bomb stays far below this
LIMIT_MB = 64  # a file stopped at 64 MB proves the limit as 256 MB did, in a quarter of the writing


class Watch:
    """Watches the machine while a command runs: task count and how fast `true` starts."""

    def __init__(self) -> None:
        self.baseline = running_tasks() or 0
        self.live_at_start = live_processes()
        self.peak_tasks = self.baseline
        self.slowest_probe = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> Watch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        while not self._stop.wait(0.2):
            self.peak_tasks = max(self.peak_tasks, running_tasks() or 0)
            started = time.monotonic()
            subprocess.run(["true"], check=False)
            self.slowest_probe = max(self.slowest_probe, time.monotonic() - started)

    def settled(self, within: float = 5) -> bool:
        """True once the live processes are back near their number at the start."""
        return wait_until(
            lambda: live_processes() <= self.live_at_start + 50,
            within,
            "the live processes to settle",
            every=0.1,
        )


def running_tasks() -> int | None:
    """Processes and threads on the machine right now (Linux), else None."""
    try:
        return int(Path("/proc/loadavg").read_text().split()[3].split("/")[1])
    except (OSError, IndexError, ValueError):
        return None


def live_processes() -> int:
    """Processes that are not zombies (the init here may reap orphans only now and then)."""
    count = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            count += stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"
        except (OSError, IndexError):
            continue
    return count


@pytest.fixture(scope="module")
def docker_image() -> tuple[Any, str]:
    client = docker_client_or_skip()
    return client, build_test_image(client)


@pytest.fixture(params=["local", "bubblewrap", "docker"])
def ctx(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ToolContext]:
    """A tool context whose commands run in the sandbox named by the parameter."""
    # Smaller than the defaults, faster: the memory hog fills 512 MB of address space before its
    # MemoryError, not 1 GB (without the limit it would grow past both, as before).
    limits = {"memory_mb": 512, "file_size_mb": LIMIT_MB}
    ctx = make_ctx(tmp_path, sandbox="local", output_limit_chars=5000, local_sandbox=limits)
    if request.param == "bubblewrap":
        ctx.runner = build_runner(ctx.settings)
        if ctx.runner.kind != "bubblewrap":
            pytest.skip("bubblewrap is not installed or cannot create a sandbox here")
    elif request.param == "docker":
        client, image = request.getfixturevalue("docker_image")
        if os.geteuid() == 0:
            os.chown(ctx.workspace.root, SANDBOX_UID, SANDBOX_UID)
        settings = ctx.settings.model_copy(update={"sandbox": "docker"})
        options = {"image": image, "pool_size": 1, "file_size_mb": LIMIT_MB}
        settings.docker = settings.docker.model_copy(update=options)
        ctx.runner = DockerRunner(settings, client)
    else:
        ctx.runner = LocalRunner(ctx.settings)
    sentinel = tmp_path / "sentinel"
    sentinel.mkdir()
    (sentinel / "keep.txt").write_text("do not touch")
    before = snapshot(tmp_path)
    yield ctx
    ctx.runner.close()
    assert snapshot(tmp_path) == before, "something outside the workspace changed"


def stopped_in_time(ctx: ToolContext, started: float, timeout: float = TIMEOUT) -> bool:
    return time.monotonic() - started < timeout + SLACK_SECONDS


def test_fork_bomb_is_contained(ctx: ToolContext) -> None:
    started = time.monotonic()
    with Watch() as watch:
        result = call(ctx, "run_command", command="b(){ b | b & }; b; sleep 60", timeout=TIMEOUT)
    assert not result.ok and "Timed out" in result.output
    assert stopped_in_time(ctx, started)
    assert watch.peak_tasks - watch.baseline < EXTRA_TASKS, watch.peak_tasks
    assert watch.slowest_probe < MAX_PROBE_SECONDS
    assert watch.settled()


def test_endless_output_is_capped(ctx: ToolContext) -> None:
    started = time.monotonic()
    result = call(ctx, "run_command", command="yes", timeout=2)
    assert not result.ok and "Timed out" in result.output and "characters omitted" in result.output
    assert len(result.output) < ctx.settings.output_limit_chars + 500
    assert stopped_in_time(ctx, started, 2)


def test_sleep_past_the_timeout_is_killed(ctx: ToolContext) -> None:
    started = time.monotonic()
    result = call(ctx, "run_command", command="sleep 60", timeout=1)
    assert not result.ok and "Timed out after 1 s" in result.output
    assert stopped_in_time(ctx, started, 1)


def test_command_ignoring_sigterm_is_killed(ctx: ToolContext) -> None:
    started = time.monotonic()
    script = "trap '' TERM; (trap '' TERM; sleep 60); sleep 60"
    result = call(ctx, "run_command", command=script, timeout=1)
    assert not result.ok and "Timed out" in result.output
    assert stopped_in_time(ctx, started, 1)


def test_ten_gigabyte_file_is_stopped(ctx: ToolContext) -> None:
    big = ctx.workspace.root / "big.bin"
    started = time.monotonic()
    try:
        result = call(ctx, "run_command", command="head -c 10G /dev/zero > big.bin", timeout=30)
        assert not result.ok and "File size limit exceeded" in result.output, result.output
        assert stopped_in_time(ctx, started, 30)
        assert big.stat().st_size <= LIMIT_MB * 1024**2 < 2 * 1024**3
    finally:
        big.unlink(missing_ok=True)


def test_memory_hog_in_python_fails_cleanly(ctx: ToolContext) -> None:
    code = "chunks = []\nwhile True:\n    chunks.append(bytearray(64 * 1024 * 1024))"
    with Watch() as watch:
        result = call(ctx, "run_python", code=code, timeout=30)
    assert not result.ok and "Timed out" not in result.output
    killed = "exit code 137" in result.output  # Docker's OOM killer
    assert killed or "MemoryError" in result.output, result.output
    assert watch.slowest_probe < MAX_PROBE_SECONDS
