"""The local sandbox: bubblewrap confinement when it works, and resource limits always."""

from __future__ import annotations

import os
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from modules.sandbox.cgroup import CGROUP_PREFIX, find_roots
from modules.sandbox.confinement import ROOT_REFUSAL, Bubblewrap
from modules.sandbox.factory import DeferredRunner, build_runner, runner_for
from modules.sandbox.local_runner import LocalRunner
from modules.sandbox.resource_limits import ResourceLimits
from modules.sandbox.runner import CommandResult, CommandRunner
from tests.kit.processes import live_command_lines
from tests.kit.settings import make_settings
from tests.kit.tools import call, make_ctx
from tests.kit.waits import wait_until
from utils.cancel import CancelToken, TaskCancelled
from utils.settings import LocalSandboxSettings, Settings

FORK_200 = """
import os, time
n = 0
try:
    for _ in range(200):
        if os.fork() == 0:
            time.sleep(3)
            os._exit(0)
        n += 1
except OSError as exc:
    print("stopped after", n, exc)
"""
# As root, drops to `nobody` and runs FORK_200 (argv[4]) plain and confined
# (RLIMIT_NPROC's own case).
AS_NOBODY = """
import os, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from utils.cancel import CancelToken
from modules.sandbox.local_runner import LocalRunner
from modules.sandbox.factory import build_runner
from utils.settings import Settings
ws = Path(sys.argv[2])
os.setgroups([]); os.setgid(65534); os.setuid(65534)
options = {"processes": 40}
settings = Settings(workspace=ws, data_dir=ws / "data", sandbox="local", local_sandbox=options)
for runner in (LocalRunner(settings), build_runner(settings)):
    result = runner.run([sys.argv[3], "-"], cwd=ws, timeout=20, cancel=CancelToken(),
                        on_output=lambda _: None, stdin=sys.argv[4])
    print(runner.kind, result.output.strip())
"""
CONNECT = """
import socket, sys
try:
    socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=2).close()
    print("connected")
except OSError as exc:
    print("refused:", exc)
"""


def local_settings(tmp_path: Path, **local: Any) -> Settings:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    return make_settings(None, tmp_path, sandbox="local", local_sandbox=local)


def workspace_of(runner: CommandRunner) -> Path:
    """The workspace of a local runner (plain or bubblewrap: what these tests build)."""
    assert isinstance(runner, LocalRunner)
    return runner.settings.workspace


def run(
    runner: CommandRunner, command: str, *, timeout: float = 20, cancel: CancelToken | None = None
) -> CommandResult:
    """Run a bash command in the runner's workspace, collecting nothing on the side."""
    return runner.run(
        ["bash", "-c", command],
        cwd=workspace_of(runner),
        timeout=timeout,
        cancel=cancel or CancelToken(),
        on_output=lambda _: None,
    )


def bubblewrap(tmp_path: Path, **local: Any) -> CommandRunner:
    runner = build_runner(local_settings(tmp_path, **local))
    if runner.kind != "bubblewrap":
        pytest.skip("bubblewrap is not installed or cannot create a sandbox here")
    return runner


@pytest.fixture
def listener() -> Iterator[int]:
    """A TCP port on 127.0.0.1 that accepts connections."""
    server = socket.create_server(("127.0.0.1", 0))
    server.listen(8)
    port = server.getsockname()[1]
    stop = threading.Event()

    def serve() -> None:
        server.settimeout(0.1)
        while not stop.is_set():
            try:
                server.accept()[0].close()
            except OSError:
                continue

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield port
    stop.set()
    thread.join()
    server.close()


def connect(runner: CommandRunner, port: int) -> str:
    result = runner.run(
        [runner.python, "-", str(port)],
        cwd=workspace_of(runner),
        timeout=20,
        cancel=CancelToken(),
        on_output=lambda _: None,
        stdin=CONNECT,
    )
    assert result.exit_code == 0, result.output
    return result.output


def test_plain_runner_says_it_is_not_isolated(tmp_path: Path) -> None:
    runner = LocalRunner(local_settings(tmp_path))
    assert runner.kind == "local"
    assert any(line.startswith("not isolated") for line in runner.isolation)
    assert any(line.startswith("limits: 600 s CPU") for line in runner.isolation)


def test_bubblewrap_is_chosen_and_described(tmp_path: Path) -> None:
    runner = bubblewrap(tmp_path)
    assert "network: cut (own empty network namespace)" in runner.isolation
    assert any(line.startswith("filesystem: only the workspace") for line in runner.isolation)
    assert not any(line.startswith("not isolated") for line in runner.isolation)


def test_bubblewrap_cuts_the_network(tmp_path: Path, listener: int) -> None:
    assert "connected" in connect(LocalRunner(local_settings(tmp_path)), listener)
    assert "refused" in connect(bubblewrap(tmp_path), listener)


def test_network_setting_leaves_it_open(tmp_path: Path, listener: int) -> None:
    runner = bubblewrap(tmp_path, network=True)
    assert any(line.startswith("network: open") for line in runner.isolation)
    assert "connected" in connect(runner, listener)


@pytest.mark.skipif(os.geteuid() == 0, reason="as root, commands need bubblewrap (next test)")
def test_unshare_fallback_cuts_the_network(tmp_path: Path, listener: int) -> None:
    runner = build_runner(local_settings(tmp_path, bubblewrap=False))
    assert runner.kind == "local"
    if "network: open" in runner.isolation:
        pytest.skip("unshare cannot create a network namespace here")
    assert "refused" in connect(runner, listener)


@pytest.mark.skipif(os.geteuid() != 0, reason="only root is refused commands without bubblewrap")
def test_as_root_without_bubblewrap_commands_are_refused(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    ctx.runner = build_runner(local_settings(tmp_path, bubblewrap=False))
    assert ctx.runner.isolation == [f"commands: {ROOT_REFUSAL}"]
    result = call(ctx, "run_command", command="touch made.txt")
    assert not result.ok and "apt-get install bubblewrap" in result.output
    assert not (ctx.workspace.root / "made.txt").exists()


def test_bubblewrap_only_the_workspace_is_writable(tmp_path: Path) -> None:
    runner = bubblewrap(tmp_path)
    sentinel = tmp_path / "sentinel"
    sentinel.mkdir()
    (sentinel / "keep.txt").write_text("original")
    home_file = Path.home() / f".sandbox-probe-{os.getpid()}"
    host_tmp_file = Path("/tmp") / f"sandbox-probe-{os.getpid()}"
    script = (
        f"echo changed > {sentinel}/keep.txt; touch {sentinel}/new.txt; touch {home_file}; "
        f"touch {host_tmp_file} && echo private-tmp-ok; echo inside > inside.txt && echo ws-ok; "
        "touch /usr/.sandbox-probe"
    )
    try:
        result = run(runner, script)
        assert "ws-ok" in result.output and "private-tmp-ok" in result.output
        assert (workspace_of(runner) / "inside.txt").read_text() == "inside\n"
        assert (sentinel / "keep.txt").read_text() == "original"
        assert sorted(p.name for p in sentinel.iterdir()) == ["keep.txt"]
        assert not home_file.exists() and not host_tmp_file.exists()
        assert "Read-only file system" in result.output
    finally:
        home_file.unlink(missing_ok=True)
        host_tmp_file.unlink(missing_ok=True)


def test_bubblewrap_runs_python_tool(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    ctx.runner = bubblewrap(tmp_path)
    result = call(ctx, "run_python", code="import sys, os\nprint(sys.prefix, os.getcwd())")
    assert result.ok, result.output
    assert str(ctx.workspace.root) in result.output


def test_bubblewrap_timeout_kills_background_work(tmp_path: Path) -> None:
    runner = bubblewrap(tmp_path)
    marker = f"sleep 1.{time.time_ns() % 10**6:06d}"  # a unique sleep length names the job
    started = time.monotonic()
    result = run(runner, f"({marker}; touch late.txt) & sleep 60", timeout=0.5)
    assert result.timed_out and time.monotonic() - started < 3
    wait_until(
        lambda: not any(marker in argv for argv in live_command_lines().values()),
        5,
        "the end of every process of the command",
    )
    assert not (workspace_of(runner) / "late.txt").exists()


def test_bubblewrap_cancel_is_quick(tmp_path: Path) -> None:
    runner = bubblewrap(tmp_path)
    cancel = CancelToken()
    threading.Timer(0.3, cancel.cancel).start()
    started = time.monotonic()
    with pytest.raises(TaskCancelled):
        run(runner, "sleep 60", cancel=cancel)
    assert time.monotonic() - started < 1.3


@pytest.fixture(params=["plain", "bubblewrap"])
def limited(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[..., CommandRunner]:
    """A factory of runners with the given local limits, plain and under bubblewrap."""

    def make(**local: Any) -> CommandRunner:
        if request.param == "plain":
            return LocalRunner(local_settings(tmp_path, **local))
        return bubblewrap(tmp_path, **local)

    return make


def test_allocating_4_gb_fails_cleanly(limited: Callable[..., CommandRunner]) -> None:
    runner = limited()
    result = run(runner, f"{runner.python} -c 'b = bytearray(4 * 1024**3); print(len(b))'")
    assert result.exit_code == 1 and "MemoryError" in result.output, result.output


def test_file_over_the_size_limit_fails(limited: Callable[..., CommandRunner]) -> None:
    runner = limited(file_size_mb=1)
    result = run(runner, "head -c 3M /dev/zero > big.bin")
    assert result.exit_code != 0 and "File size limit exceeded" in result.output
    big = workspace_of(runner) / "big.bin"
    assert big.stat().st_size == 1024 * 1024


def test_process_limit_stops_forking(limited: Callable[..., CommandRunner]) -> None:
    runner = limited(processes=40)
    result = runner.run(
        [runner.python, "-"],
        cwd=workspace_of(runner),
        timeout=20,
        cancel=CancelToken(),
        on_output=lambda _: None,
        stdin=FORK_200,
    )
    assert "stopped after" in result.output, result.output
    assert int(result.output.split("stopped after")[1].split()[0]) <= 40
    for root in find_roots().folders if os.geteuid() == 0 else []:
        assert not list(root.glob(f"workspace-agent-{os.getpid()}-*"))


@pytest.mark.skipif(os.geteuid() != 0, reason="the test above already runs unprivileged")
def test_process_limit_for_an_unprivileged_user() -> None:
    system_python = shutil.which("python3", path="/usr/bin:/bin")
    if system_python is None:
        pytest.skip("no system python3 that `nobody` may run")
    repo = Path(__file__).resolve().parent.parent
    ws = Path(tempfile.mkdtemp(prefix="sandbox-nobody-"))
    try:
        os.chown(ws, 65534, 65534)
        ws.chmod(0o755)
        done = subprocess.run(
            [sys.executable, "-c", AS_NOBODY, str(repo), str(ws), system_python, FORK_200],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    finally:
        shutil.rmtree(ws, ignore_errors=True)
    lines = done.stdout.splitlines()
    assert len(lines) == 2, done.stdout + done.stderr
    for line in lines:
        assert "stopped after" in line, line
        assert int(line.split("stopped after")[1].split()[0]) <= 40


def test_an_interpreter_under_tmp_stays_visible_inside_bubblewrap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    venv = tmp_path / "venv"
    venv.mkdir()
    monkeypatch.setattr(sys, "prefix", str(venv))
    args = Bubblewrap("bwrap", cut_network=True).args(tmp_path / "ws", tmp_path / "ws")
    tmpfs_at = args.index("/tmp")
    rebound = args.index(str(venv.resolve()))
    assert args[rebound - 1] == "--ro-bind" and rebound > tmpfs_at


def test_bubblewrap_shows_no_host_socket(tmp_path: Path) -> None:
    runner = bubblewrap(tmp_path)
    where = Path("/run") if os.access("/run", os.W_OK) else tmp_path
    path = where / f"agent-probe-{os.getpid()}.sock"
    server = socket.socket(socket.AF_UNIX)
    try:
        server.bind(str(path))
        server.listen()
        probe = f"import socket; socket.socket(socket.AF_UNIX).connect({str(path)!r})"
        script = (
            "find / -type s -not -path '/proc/*' 2>/dev/null; echo scanned; "
            f"python3 -c {shlex.quote(probe)} 2>&1 | tail -1"
        )
        result = run(runner, script)
    finally:
        server.close()
        path.unlink(missing_ok=True)
    lines = result.output.splitlines()
    assert lines[0] == "scanned", result.output  # no socket of the host anywhere in view
    assert "FileNotFoundError" in lines[1] or "No such file" in lines[1], result.output
    assert any(line.startswith("still exposed:") for line in runner.isolation)


def test_cgroups_left_by_a_killed_agent_are_removed_at_start() -> None:
    roots = find_roots().folders if os.geteuid() == 0 else []
    if not roots:
        pytest.skip("no writable pids or memory cgroup here (only root uses one)")
    leftovers = [root / f"{CGROUP_PREFIX}999999999-deadbeef" for root in roots]  # no such pid
    for leftover in leftovers:
        leftover.mkdir()
    try:
        ResourceLimits(LocalSandboxSettings())
        assert not any(leftover.exists() for leftover in leftovers)
    finally:
        for leftover in leftovers:
            if leftover.exists():
                leftover.rmdir()


def test_the_runner_is_chosen_only_when_first_needed(tmp_path: Path) -> None:
    """`cli -p` answering a question never probes bubblewrap or asks a Docker engine."""
    settings = local_settings(tmp_path)
    runner = runner_for(settings)
    assert isinstance(runner, DeferredRunner)
    assert runner.chosen is None
    runner.close()  # nothing built, nothing to release
    result = runner.run(
        ["sh", "-c", "echo ran"],
        cwd=settings.workspace,
        timeout=10,
        cancel=CancelToken(),
        on_output=lambda _: None,
    )
    assert result.output.strip() == "ran"
    assert runner.chosen is not None and runner.kind == runner.chosen.kind
