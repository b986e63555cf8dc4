"""What /ps, /logs and /stop print, the same in the local and the remote terminal: a
conversation's background processes as protocol/processes.py types them, one short plain
line each."""

from __future__ import annotations

from collections.abc import Sequence

from protocol.processes import BackgroundProcess, ProcessOutput

LOG_TAIL_BYTES = 4096  # what /logs shows: the last of a process's output


def process_id(arg: str, command: str) -> str:
    """The command's one argument, a process id (p1, p2, ...)."""
    if not arg or " " in arg:
        raise ValueError(f"usage: /{command} ID (/ps lists them)")
    return arg


def tail_offset(process: BackgroundProcess) -> int:
    """Where /logs starts reading: LOG_TAIL_BYTES before the end of its output."""
    return max(0, (process.output_end or 0) - LOG_TAIL_BYTES)


def state(process: BackgroundProcess) -> str:
    """running, exited N, killed by signal N, or why it ended (stopped, session_idle, ...)."""
    if process.running:
        return "running"
    if process.end_reason not in (None, "exited"):
        return str(process.end_reason)
    if process.signal is not None:
        return f"killed by signal {process.signal}"
    return f"exited {process.exit_code}"


def process_line(process: BackgroundProcess) -> str:
    """`p1  running  :8000  python3 -m http.server 8000`."""
    ports = ",".join(f":{port}" for port in process.ports) or "-"
    return f"{process.id}  {state(process)}  {ports}  {process.command}"


def ps_text(processes: Sequence[BackgroundProcess]) -> str:
    """/ps: a line a process, oldest first."""
    if not processes:
        return "no background processes in this conversation"
    return "\n".join(process_line(p) for p in processes)


def logs_text(process: BackgroundProcess, out: ProcessOutput) -> str:
    """/logs: the process's line, then its last output (said when there is more before it)."""
    head = process_line(process)
    if out.offset > 0:
        head += f"\n(the last {out.next_offset - out.offset:,} of {out.output_end:,} bytes)"
    return f"{head}\n{out.text.rstrip(chr(10)) or '(no output yet)'}"


def find(processes: Sequence[BackgroundProcess], wanted: str) -> BackgroundProcess:
    """The process `wanted` of the listing; ValueError naming /ps when there is none."""
    for process in processes:
        if process.id == wanted:
            return process
    raise ValueError(f"no process {wanted} in this conversation (/ps lists them)")
