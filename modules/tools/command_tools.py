"""Command tools: a shell command or a Python snippet, run in the workspace."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, Field

from modules.results import ToolError
from modules.sandbox.runner import CommandResult, LeftRunning, SandboxUnavailable
from modules.tools import process_tools
from modules.tools.tool_context import ToolContext

MAX_TIMEOUT_SECONDS = 600
STREAM_LIMIT_FACTOR = 5  # stream at most this many times the kept output to the front


def _timeout_field() -> Any:
    return Field(
        None,
        gt=0,
        description=f"Seconds before the command is stopped (default 60 unless configured, at most "
        f"{MAX_TIMEOUT_SECONDS}).",
    )


class RunCommandArgs(BaseModel):
    command: str = Field(
        description="A bash command line, run with `bash -c` in the workspace folder."
    )
    timeout: float | None = _timeout_field()
    background: bool = Field(
        False,
        description="Start it as a background process (a dev server, a watcher) and return "
        "after a few seconds with its id and first output instead of waiting for its end "
        "(timeout does not apply); then use process_output, process_input and process_stop.",
    )


class RunPythonArgs(BaseModel):
    code: str = Field(description="Python source, run as a script with the workspace as cwd.")
    timeout: float | None = _timeout_field()


def _stream_limited(on_output: Callable[[str], None], limit: int) -> Callable[[str], None]:
    """Forward output as it comes, up to `limit` characters, then say it stopped."""
    sent = 0

    def forward(text: str) -> None:
        nonlocal sent
        if sent >= limit:
            return
        room = limit - sent
        sent += len(text)
        if len(text) < room:
            on_output(text)
        else:
            on_output(text[:room] + "\n… [live output stopped; the result keeps head and tail]\n")

    return forward


def _execute(ctx: ToolContext, argv: list[str], timeout: float | None, stdin: str | None) -> str:
    seconds = ctx.settings.command_timeout if timeout is None else timeout
    if seconds > MAX_TIMEOUT_SECONDS:
        raise ToolError(
            f"timeout {seconds:g} s is too long: a command may run at most "
            f"{MAX_TIMEOUT_SECONDS} s. Split long jobs into shorter steps."
        )
    stream = _stream_limited(ctx.on_output, ctx.settings.output_limit_chars * STREAM_LIMIT_FACTOR)
    ends_with_run = False
    try:
        session = ctx.session  # the conversation's, where the runner keeps sessions
        ends_with_run = session is not None and session.ends_with_process
        result = (ctx.runner if session is None else session).run(
            argv,
            cwd=ctx.workspace.root,
            timeout=seconds,
            cancel=ctx.cancel,
            on_output=stream,
            stdin=stdin,
        )
    except SandboxUnavailable as exc:
        raise ToolError(str(exc)) from None
    except OSError as exc:
        raise ToolError(f"Could not start {argv[0]}: {exc}") from None
    return _report(result, seconds, ctx.settings.max_processes, ends_with_run)


def _left_lines(left: tuple[LeftRunning, ...], limit: int, ends_with_run: bool) -> str:
    """What the command left running, said after its output: never silence."""
    lines = []
    for process in left:
        if process.process_id is None:
            lines.append(
                f"\n[killed when the command ended: `{process.command}` (pid {process.pid}), "
                f"which it left running: {limit} background processes already run in this "
                "conversation (AGENT_MAX_PROCESSES); stop one with process_stop first]"
            )
            continue
        ports = ", ".join(str(port) for port in process.ports)
        listening = f", listening on {ports}" if ports else ""
        lines.append(
            f"\n[left running in the background: {process.process_id} `{process.command}` "
            f"(pid {process.pid}{listening}). Read it with process_output, stop it with "
            "process_stop.]"
        )
    if lines and ends_with_run:
        lines.append("\n[this run ends when the task ends; background processes stop with it]")
    return "".join(lines)


def _report(result: CommandResult, timeout: float, limit: int, ends_with_run: bool) -> str:
    """The result text; raises ToolError (with the output) on failure or timeout."""
    seconds = result.duration_ms / 1000
    output = result.output if result.output.strip() else "(no output)"
    if result.note:
        output += f"\n{result.note}"
    output += _left_lines(result.left, limit, ends_with_run)
    if result.timed_out:
        raise ToolError(
            f"Timed out after {timeout:g} s and was stopped (duration {seconds:.1f} s).\n"
            f"Output:\n{output}"
        )
    status = f"exit code {result.exit_code}, duration {seconds:.1f} s, timed out: no"
    if result.exit_code != 0:
        raise ToolError(f"Failed: {status}.\nOutput:\n{output}")
    return f"{status}.\nOutput:\n{output}"


def _journaled(ctx: ToolContext, argv: list[str], timeout: float | None, stdin: str | None) -> str:
    """Run a command between two workspace scans, so the task can undo what it changed. The
    scan after it runs while the model reads the result: the journal's next use waits for it."""
    if ctx.journal is None:
        return _execute(ctx, argv, timeout, stdin)
    snapshot = ctx.journal.snapshot()
    try:
        return _execute(ctx, argv, timeout, stdin)
    finally:
        ctx.journal.record_changes_later(snapshot)


def _journaled_start(ctx: ToolContext, command: str) -> str:
    """Start a background process between two workspace scans: what it changed while it
    settled can be undone; what it changes later is the task's next command's to see."""
    if ctx.journal is None:
        return process_tools.start_background(ctx, command)
    snapshot = ctx.journal.snapshot()
    try:
        return process_tools.start_background(ctx, command)
    finally:
        ctx.journal.record_changes_later(snapshot)


def run_command(ctx: ToolContext, args: RunCommandArgs) -> str:
    """Run a shell command in the workspace folder and return its combined stdout and stderr.

    Output is streamed while it runs; long output keeps its head and tail. A non-zero exit
    code or a timeout makes the call fail, with the output included. Stdin is empty, so
    interactive programs will not wait for input. A server or watcher that must keep running
    goes in the background (background: true), never with `&`: what a command leaves running
    (`cmd &`) is adopted as a background process and the result names it.
    """
    if args.background:
        return _journaled_start(ctx, args.command)
    return _journaled(ctx, ["bash", "-c", args.command], args.timeout, None)


def run_python(ctx: ToolContext, args: RunPythonArgs) -> str:
    """Run Python code in the workspace folder with the sandbox's Python 3 interpreter.

    Returns combined stdout and stderr; print what you want to see. A non-zero exit code
    (for example an uncaught exception) or a timeout makes the call fail, with the output.
    """
    return _journaled(ctx, [ctx.runner.python, "-"], args.timeout, args.code)
