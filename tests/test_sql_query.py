"""The data agent's sql_query tool: read-only SQL over SQLite files in the workspace."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from modules.tools.tool_context import ToolContext
from tests.kit.tools import call


@pytest.fixture
def ctx(ctx: ToolContext) -> ToolContext:
    with sqlite3.connect(ctx.workspace.root / "shop.db") as db:
        db.execute("CREATE TABLE sales (item TEXT, qty INTEGER)")
        db.executemany("INSERT INTO sales VALUES (?, ?)", [(f"item{n}", n) for n in range(50)])
    return ctx


def test_a_select_answers_a_table(ctx: ToolContext) -> None:
    result = call(
        ctx,
        "sql_query",
        path="shop.db",
        query="SELECT item, qty FROM sales WHERE qty >= 48 ORDER BY qty",
    )
    assert result.ok, result.output
    assert result.output.splitlines() == [
        "item | qty",
        "--- | ---",
        "item48 | 48",
        "item49 | 49",
        "2 rows",
    ]


def test_rows_are_capped(ctx: ToolContext) -> None:
    result = call(ctx, "sql_query", path="shop.db", query="SELECT * FROM sales", max_rows=5)
    assert result.ok and result.output.endswith("5 rows (stopped at max_rows=5)")


@pytest.mark.parametrize(
    "query",
    [
        "DELETE FROM sales",
        "UPDATE sales SET qty = 0",
        "DROP TABLE sales",
        "INSERT INTO sales VALUES ('x', 1)",
        "ATTACH DATABASE 'other.db' AS other",
        "SELECT 1; DELETE FROM sales",
    ],
)
def test_nothing_but_reading_runs(ctx: ToolContext, query: str) -> None:
    result = call(ctx, "sql_query", path="shop.db", query=query)
    assert not result.ok
    with sqlite3.connect(ctx.workspace.root / "shop.db") as db:
        assert db.execute("SELECT count(*) FROM sales").fetchone() == (50,)


def test_other_files_and_paths_outside_are_refused(ctx: ToolContext, tmp_path: Path) -> None:
    (ctx.workspace.root / "notes.txt").write_text("not a database")
    assert (
        "not an SQLite database"
        in call(ctx, "sql_query", path="notes.txt", query="SELECT 1").output
    )
    outside = tmp_path / "outside.db"
    sqlite3.connect(outside).close()
    (ctx.workspace.root / "link.db").symlink_to(outside)
    result = call(ctx, "sql_query", path="link.db", query="SELECT 1")
    assert not result.ok and "outside the workspace" in result.output


# --- a database or a query made to hurt: the query runs in a child with its own limits ------


def test_a_value_past_the_limit_is_an_error_and_the_server_keeps_its_memory(
    ctx: ToolContext,
) -> None:
    before = peak_mb()
    result = call(ctx, "sql_query", path="shop.db", query="SELECT zeroblob(400000000)")
    assert not result.ok and "string or blob too big" in result.output, result.output
    assert peak_mb() - before < 50  # in this process it took 800 MB


def test_a_planted_view_and_a_memory_hoard_stay_within_the_child(ctx: ToolContext) -> None:
    with sqlite3.connect(ctx.workspace.root / "shop.db") as db:
        db.execute("CREATE VIEW big AS SELECT zeroblob(300000000) AS z")
    result = call(ctx, "sql_query", path="shop.db", query="SELECT * FROM big")
    assert not result.ok and "string or blob too big" in result.output, result.output
    hoard = (  # every distinct 100 KB value kept in memory: past the child's 512 MB
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 100000) "
        "SELECT count(DISTINCT zeroblob(100000) || randomblob(16)) FROM c"
    )
    result = call(ctx, "sql_query", path="shop.db", query=hoard)
    assert not result.ok, result.output
    assert "512 MB of memory" in result.output, result.output


def test_a_long_value_is_cut_before_it_is_shown(ctx: ToolContext) -> None:
    result = call(ctx, "sql_query", path="shop.db", query="SELECT zeroblob(20000000) AS b")
    assert result.ok, result.output
    line = result.output.splitlines()[2]
    assert line.startswith("b'\\x00") and line.endswith("…") and len(line) <= 200


def peak_mb() -> float:
    """This process's peak resident memory so far (VmHWM), in MB."""
    status = Path("/proc/self/status").read_text()
    return int(status.split("VmHWM:")[1].split()[0]) / 1024
