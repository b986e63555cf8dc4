"""The `sql_query` tool: read-only SQL over an SQLite file in the workspace, rows capped."""

from __future__ import annotations

import sqlite3
import time

from pydantic import BaseModel, Field

from modules.results import ToolError
from modules.tools.tool_context import ToolContext

ROW_CAP = 1000
CELL_CHARS = 200
QUERY_SECONDS = 10.0
_READING = {
    sqlite3.SQLITE_SELECT,
    sqlite3.SQLITE_READ,
    sqlite3.SQLITE_FUNCTION,
    sqlite3.SQLITE_RECURSIVE,
}


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
        # The open file itself, reached through /proc: no name is resolved again.
        uri = f"file:/proc/self/fd/{handle.fileno()}?mode=ro&immutable=1"
        connection = sqlite3.connect(uri, uri=True, check_same_thread=False)
        try:
            return _run(connection, args, rel)
        finally:
            connection.close()


def _run(connection: sqlite3.Connection, args: SqlQueryArgs, rel: str) -> str:
    deadline = time.monotonic() + QUERY_SECONDS
    connection.set_authorizer(
        lambda action, *_: sqlite3.SQLITE_OK if action in _READING else sqlite3.SQLITE_DENY
    )
    connection.set_progress_handler(lambda: int(time.monotonic() > deadline), 10_000)
    try:
        cursor = connection.execute(args.query)
        rows = cursor.fetchmany(args.max_rows + 1)
    except sqlite3.Error as exc:
        if "interrupted" in str(exc):
            raise ToolError(f"The query ran past {QUERY_SECONDS:g} s and was stopped.") from None
        hint = " Only SELECT statements are allowed." if "not authorized" in str(exc) else ""
        raise ToolError(f"SQL error in {rel}: {exc}.{hint}") from None
    columns = [d[0] for d in cursor.description or ()]
    if not columns:
        return "The statement returned nothing."
    more = len(rows) > args.max_rows
    rows = rows[: args.max_rows]
    lines = [" | ".join(columns), " | ".join("---" for _ in columns)]
    lines += [" | ".join(_cell(value) for value in row) for row in rows]
    tail = f"{len(rows)} rows" + (f" (stopped at max_rows={args.max_rows})" if more else "")
    return "\n".join([*lines, tail])


def _cell(value: object) -> str:
    text = "NULL" if value is None else str(value)
    text = text.replace("\n", " ").replace("|", "\\|")
    return text if len(text) <= CELL_CHARS else text[: CELL_CHARS - 1] + "…"
