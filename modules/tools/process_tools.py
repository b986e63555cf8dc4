"""Background processes for the model: started by run_command with `background: true`, then
read (from an offset, waiting for output or a pattern), written to, stopped and listed. They
live in the conversation's sandbox session (modules/sandbox/session/)."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Literal

import regex
from pydantic import BaseModel, Field

from model.messages import ChatMessage
from modules.results import ToolError
from modules.sandbox.runner import SandboxUnavailable
from modules.sandbox.session.background import Output, ProcessLimitReached, UnknownProcess
from modules.sandbox.session.process import ProcessInfo
from modules.sandbox.session.session import SandboxSession
from modules.tools.tool_context import ToolContext

MAX_WAIT_SECONDS = 60.0
WAIT_SLICE_SECONDS = 0.5  # a wait looks at the task's cancel this often
MAX_PATTERN_CHARS = 200
PATTERN_WINDOW_CHARS = 16_384  # a pattern is looked for in the last this many characters
PATTERN_MATCH_SECONDS = 0.05  # one search past this is given up (a pathological pattern)
MAX_INPUT_CHARS = 65_536


class ProcessIdArgs(BaseModel):
    process_id: str = Field(description="The process's id, as run_command gave it (p1, p2, ...).")


class ProcessOutputArgs(ProcessIdArgs):
    offset: int | None = Field(
        None,
        ge=0,
        description="Byte offset to read from (default: right after what you already read).",
    )
    wait_seconds: float = Field(
        0,
        ge=0,
        le=MAX_WAIT_SECONDS,
        description=f"Wait up to this long (at most {MAX_WAIT_SECONDS:g} s) for new output, or "
        "with `pattern` for output that matches it; returns at once when the process ended.",
    )
    pattern: str | None = Field(
        None,
        max_length=MAX_PATTERN_CHARS,
        description="A regular expression to wait for, e.g. 'Serving HTTP|ready'; without "
        "an offset it is looked for in all the output kept (a line printed before counts).",
    )


class ProcessInputArgs(ProcessIdArgs):
    text: str = Field(
        max_length=MAX_INPUT_CHARS,
        description="Text written to its stdin as is (end a line with \\n).",
    )
    eof: bool = Field(False, description="Close its stdin after the text (end of input).")


class ProcessStopArgs(ProcessIdArgs):
    signal: Literal["TERM", "INT", "KILL"] = Field(
        "TERM", description="TERM (default) or INT; KILL follows after 2 s if it is still there."
    )


class ProcessListArgs(BaseModel):
    pass


def session_of(ctx: ToolContext) -> SandboxSession:
    """The conversation's sandbox session, or a ToolError where the sandbox keeps none."""
    try:
        session = ctx.session
    except SandboxUnavailable as exc:
        raise ToolError(str(exc)) from None
    if session is None:
        raise ToolError(
            f"background processes need a sandbox session; this sandbox ({ctx.runner.kind}) "
            "runs each command on its own. Run the command in the foreground instead."
        )
    return session


def describe(info: ProcessInfo) -> str:
    """One line: id, command, pid and state (running with its ports, or how it ended); a
    person's terminal says so, and what runs in it."""
    record = info.record
    head = f"{record.id} `{_one_line(record.command)}` (pid {record.pid})"
    if record.terminal:
        head = f"{record.id} the person's own terminal (pid {record.pid}; not yours to use)"
        if record.running:
            doing = f"`{info.foreground}` in it" if info.foreground else "at its prompt"
            return f"{head}: running, {doing}"
    if record.running:
        ports = ", ".join(str(p) for p in info.ports)
        return f"{head}: running" + (f", listening on {ports}" if ports else "")
    if record.end_reason == "exited" or record.end_reason is None:
        how = f"exit code {record.exit_code}" if record.exit_code is not None else "ended"
        if record.signal is not None:
            how = f"killed by signal {record.signal}"
        return f"{head}: exited ({how})"
    return f"{head}: ended ({record.end_reason})"


def _one_line(command: str, limit: int = 120) -> str:
    flat = " ".join(command.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _output_text(ctx: ToolContext, out: Output) -> str:
    """What was read, bounded, with the offset to read on from."""
    text = out.text
    lines = [describe(out.info)]
    if out.skipped:
        lines.append(f"[{out.skipped} earlier bytes are no longer kept in memory]")
    limit = ctx.settings.output_limit_chars
    next_offset = out.next_offset
    if len(text) > limit:
        text = text[:limit]
        next_offset = out.offset + out.skipped + len(text.encode("utf-8"))
        more = f"\n[output cut at {limit} characters: read on with offset {next_offset}]"
    elif out.next_offset < out.info.output_end:
        more = f"\n[more output: read on with offset {out.next_offset}]"
    else:
        more = ""
    body = text if text else "(no new output)"
    lines.append(f"Output (bytes {out.offset}-{next_offset}, next offset {next_offset}):")
    return "\n".join(lines) + "\n" + body + more


def _with_ports(session: SandboxSession, out: Output) -> Output:
    """The output with the ports its process listens on now."""
    if not out.info.record.running:
        return out
    for info in session.processes():
        if info.record.id == out.info.record.id:
            return replace(out, info=replace(out.info, ports=info.ports))
    return out


def start_background(ctx: ToolContext, command: str) -> str:
    """run_command with background: start it, wait the settle window, report; an early end
    with a failure is a failed result carrying its output."""
    session = session_of(ctx)
    try:
        out = session.start(command, ctx.workspace.root)
    except ProcessLimitReached as exc:
        raise ToolError(f"{exc}. process_list shows them.") from None
    except SandboxUnavailable as exc:
        raise ToolError(str(exc)) from None
    text = _output_text(ctx, out)
    record = out.info.record
    if not record.running and (record.exit_code != 0 or record.signal is not None):
        raise ToolError(f"It ended at once. {text}")
    if record.running:
        text += (
            f"\n[running in the background as {record.id}: wait for it with process_output "
            f"(pattern), stop it with process_stop when done]"
        )
    return text


def _matcher(pattern: str) -> regex.Pattern[str]:
    try:
        return regex.compile(pattern)
    except regex.error as exc:
        raise ToolError(f"pattern is not a valid regular expression: {exc}") from None


def _found(compiled: regex.Pattern[str], text: str) -> bool:
    try:
        window = text[-PATTERN_WINDOW_CHARS:]
        return compiled.search(window, timeout=PATTERN_MATCH_SECONDS) is not None
    except TimeoutError:
        return False


def process_output(ctx: ToolContext, args: ProcessOutputArgs) -> str:
    """Read a background process's output: what you have not read yet (or from `offset`).

    With wait_seconds it waits for new output, or with `pattern` for output matching the
    regular expression (e.g. a server's 'ready' line); it returns at once when the process has
    ended. The answer says whether it still runs (and its ports) or its exit code, and the
    offset to read on from. The lifecycle: run_command {background: true}, then process_output
    {pattern, wait_seconds} until it is ready, use it, read what it logged, process_stop.
    """
    session = session_of(ctx)
    compiled = None if args.pattern is None else _matcher(args.pattern)
    until = None if compiled is None else lambda text: _found(compiled, text)
    deadline = time.monotonic() + args.wait_seconds
    begin = 0 if args.offset is None and compiled is not None else args.offset
    try:
        while True:
            step = min(WAIT_SLICE_SECONDS, max(0.0, deadline - time.monotonic()))
            out = session.read(args.process_id, begin, step, until)
            begin = out.offset  # a wait goes on from where it began
            seen = out.text if compiled is None else _found(compiled, out.text)
            running = out.info.record.running
            if seen or not running or ctx.cancel.cancelled or time.monotonic() >= deadline:
                break
    except UnknownProcess as exc:
        raise ToolError(f"{exc}. process_list shows them.") from None
    text = _output_text(ctx, _with_ports(session, out))
    if compiled is not None and not _found(compiled, out.text) and out.info.record.running:
        text += f"\n[pattern not seen within {args.wait_seconds:g} s]"
    return text


def process_input(ctx: ToolContext, args: ProcessInputArgs) -> str:
    """Write text to a background process's stdin (and with eof close it), e.g. a line to a
    program that reads commands. Read its answer with process_output."""
    session = session_of(ctx)
    try:
        written = session.write(args.process_id, args.text, args.eof)
    except UnknownProcess as exc:
        raise ToolError(f"{exc}. process_list shows them.") from None
    size = len(args.text.encode("utf-8"))
    closed = "; its input is closed" if args.eof else ""
    if written < size:
        taken = f"{written} of {size} bytes (it did not take the rest)"
        return f"Wrote {taken} to {args.process_id}{closed}."
    return f"Wrote {written} bytes to {args.process_id}{closed}."


def process_stop(ctx: ToolContext, args: ProcessStopArgs) -> str:
    """Stop a background process you started (and everything it started): SIGTERM by default,
    SIGKILL 2 s later if it is still there. Stop what you no longer need."""
    session = session_of(ctx)
    try:
        info = session.stop(args.process_id, args.signal)
    except UnknownProcess as exc:
        raise ToolError(f"{exc}. process_list shows them.") from None
    return f"Stopped: {describe(info)}."


def process_list(ctx: ToolContext, args: ProcessListArgs) -> str:
    """List this conversation's background processes: running ones with their ports, and how
    the others ended; and the terminals the person opened, with what runs in them (theirs: you
    cannot type into them, read or stop them)."""
    session = session_of(ctx)
    found = session.processes()
    if not found:
        return "No background processes in this conversation."
    limit = ctx.settings.max_processes
    running = sum(1 for info in found if info.record.running and not info.record.terminal)
    lines = [describe(info) for info in found[-50:]]
    return f"{running} of at most {limit} running:\n" + "\n".join(lines)


def with_ended_processes(record: ChatMessage) -> ChatMessage:
    """A user message as the model gets it: with a line naming the background processes that
    ended when the server stopped since the last task (its meta.processes_ended)."""
    ended = (record.get("meta") or {}).get("processes_ended")
    content = record.get("content")
    if record.get("role") != "user" or not isinstance(ended, list) or not isinstance(content, str):
        return record
    ended = [p for p in ended if isinstance(p, dict)]
    if not ended:
        return record
    named = ", ".join(f"{p.get('id')} `{_one_line(str(p.get('command')))}`" for p in ended)
    note = (
        f"[Background processes of this conversation ended when the server stopped: {named}. "
        "Start again what is still needed (run_command with background: true).]"
    )
    return {**record, "content": f"{content}\n\n{note}"}
