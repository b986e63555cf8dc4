"""Command tools and the local runner with real subprocesses."""

from __future__ import annotations

import os
import resource
import threading
import time
from pathlib import Path

import pytest

from modules.sandbox.local_runner import LocalRunner
from modules.tools.tool_context import ToolContext
from tests.kit.tools import call, make_ctx
from tests.kit.waits import wait_until
from utils.cancel import CancelToken, TaskCancelled

pytestmark = pytest.mark.ctx(output_limit_chars=5000)


def process_gone(pid: int, within: float = 0.5) -> bool:
    """True once `pid` has stopped running, within a moment (a zombie counts as gone)."""

    def gone() -> bool:
        try:
            return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
        except (FileNotFoundError, ProcessLookupError):
            return True

    return wait_until(gone, within, f"process {pid} to end", every=0.01)


def wait_for_pid(path: Path) -> int:
    def written() -> str | None:
        return path.read_text().strip() if path.exists() else None

    return int(wait_until(written, 5, f"{path} written"))


def test_run_command_success(ctx: ToolContext) -> None:
    result = call(ctx, "run_command", command="echo hello; echo oops >&2; pwd")
    assert result.ok, result.output
    assert result.output.startswith("exit code 0, duration ")
    assert "timed out: no" in result.output
    assert "hello\noops\n" in result.output
    assert str(ctx.workspace.root) in result.output


def test_run_command_failure_includes_output(ctx: ToolContext) -> None:
    result = call(ctx, "run_command", command="echo before; exit 3")
    assert not result.ok
    assert "exit code 3" in result.output and "before" in result.output


def test_run_python_with_code_on_stdin(ctx: ToolContext) -> None:
    ok = call(ctx, "run_python", code="import os\nprint(os.getcwd())\nprint(6 * 7)")
    assert ok.ok and "42" in ok.output and str(ctx.workspace.root) in ok.output
    bad = call(ctx, "run_python", code="raise ValueError('nope')")
    assert not bad.ok and "ValueError: nope" in bad.output and "exit code 1" in bad.output


def test_timeout_validation(ctx: ToolContext) -> None:
    too_long = call(ctx, "run_command", command="true", timeout=601)
    assert not too_long.ok and "at most 600" in too_long.output
    assert not call(ctx, "run_command", command="true", timeout=0).ok


def test_timeout_kills_grandchildren(ctx: ToolContext, tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild.pid"
    started = time.monotonic()
    result = call(
        ctx, "run_command", command=f"sleep 60 & echo $! > {pidfile}; sleep 60", timeout=0.5
    )
    assert time.monotonic() - started < 4
    assert not result.ok and "Timed out after 0.5 s" in result.output
    pid = wait_for_pid(pidfile)
    assert process_gone(pid)


def test_sigterm_ignoring_command_still_dies(ctx: ToolContext, tmp_path: Path) -> None:
    pidfile = tmp_path / "stubborn.pid"
    script = f"trap '' TERM; (trap '' TERM; echo $BASHPID > {pidfile}; sleep 60; sleep 60) ; :"
    started = time.monotonic()
    result = call(ctx, "run_command", command=script, timeout=0.5)
    assert time.monotonic() - started < 4
    assert not result.ok and "Timed out" in result.output
    assert process_gone(wait_for_pid(pidfile))


def test_endless_output_is_capped(ctx: ToolContext) -> None:
    runner = LocalRunner(ctx.settings)
    seen = 0

    def count(text: str) -> None:
        nonlocal seen
        seen += len(text)

    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    result = runner.run(
        ["yes"], cwd=ctx.workspace.root, timeout=2, cancel=CancelToken(), on_output=count
    )
    peak_growth_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak_before
    assert peak_growth_kb < 50_000
    assert result.timed_out and result.exit_code is None
    assert seen > 10 * ctx.settings.output_limit_chars
    assert len(result.output) <= ctx.settings.output_limit_chars + 100
    assert result.omitted_chars == seen - len(result.output.split("\n… [")[0]) - len(
        result.output.split("omitted] …\n")[1]
    )
    assert result.output.startswith("y\ny\n") and result.output.endswith("y\n")


def test_streamed_output_to_the_front_is_limited(ctx: ToolContext) -> None:
    chunks: list[str] = []
    ctx.on_output = chunks.append
    result = call(ctx, "run_command", command="yes | head -c 200000")
    assert result.ok
    streamed = "".join(chunks)
    assert len(streamed) < 5 * ctx.settings.output_limit_chars + 200
    assert "live output stopped" in streamed


def test_cancel_from_another_thread(ctx: ToolContext, tmp_path: Path) -> None:
    pidfile = tmp_path / "cancelled.pid"
    threading.Timer(0.5, ctx.cancel.cancel).start()
    started = time.monotonic()
    with pytest.raises(TaskCancelled):
        call(ctx, "run_command", command=f"sleep 60 & echo $! > {pidfile}; wait")
    assert time.monotonic() - started < 1.5
    assert process_gone(wait_for_pid(pidfile))


def test_already_cancelled_does_not_start(ctx: ToolContext, tmp_path: Path) -> None:
    ctx.cancel.cancel()
    with pytest.raises(TaskCancelled):
        call(ctx, "run_command", command=f"touch {tmp_path / 'ran'}")
    assert not (tmp_path / "ran").exists()


def test_commands_get_an_allow_list_of_variables(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("AGENT_API_KEY", "sk-fake-agent-key-123")
    monkeypatch.setenv("SOME_COPY_OF_IT", "sk-fake-agent-key-123")
    monkeypatch.setenv("TAVILY_API_KEY", "tvly-fake")
    monkeypatch.setenv("ACME_SERVICE_PASSWORD", "hunter2")
    monkeypatch.setenv("NAMED_VAR", "visible")
    monkeypatch.setenv("LC_TIME", "C.UTF-8")
    ctx = make_ctx(
        tmp_path, api_key="sk-fake-agent-key-123", command_env=["NAMED_VAR", "SOME_COPY_OF_IT"]
    )
    result = call(ctx, "run_command", command="env")
    assert result.ok
    assert "sk-fake-agent-key-123" not in result.output
    assert "tvly-fake" not in result.output and "TAVILY_API_KEY" not in result.output
    assert "hunter2" not in result.output  # a secret under a name we do not know
    assert "NAMED_VAR=visible" in result.output and "LC_TIME=C.UTF-8" in result.output
    assert "PYTHONUNBUFFERED=1" in result.output
    assert os.environ["AGENT_API_KEY"] == "sk-fake-agent-key-123"


def test_output_arrives_before_the_command_ends(ctx: ToolContext) -> None:
    arrivals: list[tuple[float, str]] = []
    ctx.on_output = lambda text: arrivals.append((time.monotonic(), text))
    started = time.monotonic()
    result = call(ctx, "run_python", code="import time\nprint('first')\ntime.sleep(1)\nprint('x')")
    ended = time.monotonic()
    assert result.ok
    first_at = next(t for t, text in arrivals if "first" in text)
    assert first_at - started < ended - started - 0.7


def test_utf8_split_across_reads_decodes_cleanly(ctx: ToolContext) -> None:
    code = (
        "import sys, time\nb = 'é'.encode()\nsys.stdout.buffer.write(b[:1]); sys.stdout.flush()\n"
    )
    code += "time.sleep(0.2)\nsys.stdout.buffer.write(b[1:] + b'\\n')"
    result = call(ctx, "run_python", code=code)
    assert result.ok and "é\n" in result.output and "\ufffd" not in result.output


def test_exit_with_background_child_holding_output(ctx: ToolContext, tmp_path: Path) -> None:
    pidfile = tmp_path / "bg.pid"
    started = time.monotonic()
    result = call(ctx, "run_command", command=f"echo done; sleep 60 & echo $! > {pidfile}")
    assert result.ok and "done" in result.output
    assert time.monotonic() - started < 3
    assert process_gone(wait_for_pid(pidfile))
