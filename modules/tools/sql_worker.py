"""The child process that runs one `sql_query` on a database a task may have written.

Run as `python -m modules.tools.sql_worker DATABASE MAX_ROWS MEMORY_BYTES CPU_SECONDS` by
modules/tools/sql_tool.py, the query on stdin, DATABASE where the worker's jail shows the file
the tool opened (modules/sandbox/worker_jail.py: bound at a path of its own, so no name in the
workspace is resolved again). It limits its own memory and CPU time first, then opens the file
read-only as SQLite's guidance for untrusted databases says (https://sqlite.org/security.html):
the schema is not trusted (no function with side effects from a view or a trigger), cell sizes
are checked, no memory mapping, temporary tables in memory (within the limit, never on disk),
values of at most MAX_VALUE_BYTES, no attached database, and an authorizer that lets only
reading run. It prints the answer's text (a table), or the error's after `error: `.
"""

from __future__ import annotations

import sqlite3
import sys
import time

from utils.workers import limit_self

QUERY_SECONDS = 10.0
CELL_CHARS = 200
MAX_VALUE_BYTES = 32 * 1024 * 1024  # a string or blob SQLite may make (its default: 1 GB)
MAX_OUTPUT_CHARS = 1_000_000  # of the table; the model is shown far less
_READING = {
    sqlite3.SQLITE_SELECT,
    sqlite3.SQLITE_READ,
    sqlite3.SQLITE_FUNCTION,
    sqlite3.SQLITE_RECURSIVE,
}
_UNTRUSTED = (
    "PRAGMA trusted_schema = OFF",
    "PRAGMA cell_size_check = ON",
    "PRAGMA mmap_size = 0",
    "PRAGMA temp_store = MEMORY",
)


class QueryError(Exception):
    """What the model is told went wrong."""


def run(database: str, query: str, max_rows: int) -> str:
    """The rows of `query` on the database at `database`, as a table."""
    uri = f"file:{database}?mode=ro&immutable=1"
    connection = sqlite3.connect(uri, uri=True)
    try:
        for pragma in _UNTRUSTED:
            connection.execute(pragma)
        connection.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
        connection.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
        deadline = time.monotonic() + QUERY_SECONDS
        connection.set_authorizer(
            lambda action, *_: sqlite3.SQLITE_OK if action in _READING else sqlite3.SQLITE_DENY
        )
        connection.set_progress_handler(lambda: int(time.monotonic() > deadline), 10_000)
        return _table(connection.execute(query), max_rows)
    except sqlite3.Error as exc:
        if "interrupted" in str(exc):
            raise QueryError(f"The query ran past {QUERY_SECONDS:g} s and was stopped.") from None
        hint = " Only SELECT statements are allowed." if "not authorized" in str(exc) else ""
        raise QueryError(f"{str(exc).rstrip('.')}.{hint}") from None
    finally:
        connection.close()


def _table(cursor: sqlite3.Cursor, max_rows: int) -> str:
    columns = [d[0] for d in cursor.description or ()]
    if not columns:
        return "The statement returned nothing."
    lines = [" | ".join(columns), " | ".join("---" for _ in columns)]
    size, shown = 0, 0
    for row in cursor:  # one row in memory at a time, each value cut before it is shown
        if shown == max_rows:
            return "\n".join([*lines, f"{shown} rows (stopped at max_rows={max_rows})"])
        line = " | ".join(_cell(value) for value in row)
        size += len(line)
        if size > MAX_OUTPUT_CHARS:
            return "\n".join([*lines, f"{shown} rows (stopped: the table passed {size:,} chars)"])
        lines.append(line)
        shown += 1
    return "\n".join([*lines, f"{shown} rows"])


def _cell(value: object) -> str:
    if value is None:
        text = "NULL"
    elif isinstance(value, bytes):
        text = repr(value[:CELL_CHARS]) + ("…" if len(value) > CELL_CHARS else "")
    else:
        text = str(value)[: CELL_CHARS + 1]
    text = text.replace("\n", " ").replace("|", "\\|")
    return text if len(text) <= CELL_CHARS else text[: CELL_CHARS - 1] + "…"


def main(argv: list[str]) -> int:
    database, (max_rows, memory, cpu) = argv[0], (int(arg) for arg in argv[1:])
    limit_self(memory, cpu)
    query = sys.stdin.read()
    try:
        sys.stdout.write(run(database, query, max_rows))
    except QueryError as exc:
        sys.stdout.write(f"error: {exc}")
    except MemoryError:
        sys.stdout.write(f"error: the query needed more than {memory / 2**20:,.0f} MB of memory.")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
