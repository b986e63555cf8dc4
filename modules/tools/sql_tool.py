"""The `sql_query` tool: read-only SQL over an SQLite file in the workspace, rows capped.

The database is what a task may have written, and SQLite runs in whatever process opens it: a
crafted file or query (`SELECT zeroblob(400000000)`) took the server 800 MB. So the query runs
in a child (modules/tools/sql_worker.py) with its own memory and CPU limits, in the workers'
jail, on the file this process opened through the workspace's fd walk."""

from __future__ import annotations

from pydantic import BaseModel, Field

from modules.results import ToolError
from modules.sandbox.worker_jail import worker_jail
from modules.tools.sql_worker import QUERY_SECONDS
from modules.tools.tool_context import ToolContext
from utils.workers import run_worker

ROW_CAP = 1000
MEMORY_BYTES = 512 * 1024 * 1024
_WALL_SLACK = 5.0  # the child's start, and the query's last stretch to its progress check
_OUTPUT_BYTES = 8 * 1024 * 1024


class SqlQueryArgs(BaseModel):
    path: str = Field(description="The SQLite database file, relative to the workspace.")
    query: str = Field(min_length=1, description="One SELECT (or WITH ... SELECT) statement.")
    max_rows: int = Field(200, ge=1, le=ROW_CAP, description="Most rows to return.")


def sql_query(ctx: ToolContext, args: SqlQueryArgs) -> str:
    """Run one read-only SQL query on an SQLite file in the workspace; rows come back as a
    table (at most max_rows). Only SELECT statements run; the file is never changed.

    List the tables with: SELECT name, sql FROM sqlite_master WHERE type = 'table'
    """
    rel = ctx.workspace.relative(ctx.workspace.resolve(args.path))
    with ctx.workspace.open_regular(rel, args.path) as (handle, _):
        if handle.read(16) != b"SQLite format 3\x00":
            raise ToolError(f"{rel} is not an SQLite database.")
        fd = handle.fileno()
        cpu = str(int(QUERY_SECONDS) + 2)
        jail = worker_jail(ctx.settings.local_sandbox)
        done = run_worker(
            "modules.tools.sql_worker",
            [jail.path_of(fd), str(args.max_rows), str(MEMORY_BYTES), cpu],
            args.query.encode("utf-8", "replace"),
            QUERY_SECONDS + _WALL_SLACK,
            pass_fds=(fd,),
            confine=jail.confined,
        )
    text = done.stdout[:_OUTPUT_BYTES].decode("utf-8", "replace")
    if done.overdue or done.returncode < 0 or b"MemoryError" in done.stderr:
        raise ToolError(
            f"The query on {rel} was stopped: it needed more than {QUERY_SECONDS:g} s or "
            f"{MEMORY_BYTES // 2**20} MB of memory."
        )
    if done.returncode != 0 or text.startswith("error: "):
        why = text.removeprefix("error: ") or _last_line(done.stderr)
        raise ToolError(f"SQL error in {rel}: {why}")
    return text


def _last_line(stderr: bytes) -> str:
    lines = stderr.decode("utf-8", "replace").strip().splitlines()
    return lines[-1][:300] if lines else "the query's process ended without an answer"
