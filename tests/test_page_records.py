"""How the page reads a tool result record of the history (static/js/records.js, imported in
Node): `meta.declined` says a call was declined; a record written before it was (history on
disk) is recognised by the text the model was sent, and only such a record."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
RECORDS_MODULE = ROOT / "static" / "js" / "records.js"
NODE = shutil.which("node")

pytestmark = pytest.mark.skipif(
    NODE is None, reason="node is not installed: records.js is read by importing it"
)

READ = """
const { resultFromRecord } = await import(process.argv[1]);
console.log(JSON.stringify(JSON.parse(process.argv[2]).map(resultFromRecord)));
"""
DECLINED_TEXT = "The user declined this delete_file call. Do not retry it as is."


def results(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    assert NODE is not None
    done = subprocess.run(
        [NODE, "--input-type=module", "-e", READ, RECORDS_MODULE.as_uri(), json.dumps(records)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    read: list[dict[str, Any]] = json.loads(done.stdout)
    return read


def test_declined_comes_from_the_record_and_the_text_only_for_older_records() -> None:
    records = [
        {"content": "Deleted.", "meta": {"ok": False, "duration_ms": 3, "declined": True}},
        {"content": DECLINED_TEXT, "meta": {"ok": False, "duration_ms": 0}},  # before `declined`
        {"content": DECLINED_TEXT, "meta": {"ok": False, "declined": False}},
        {"content": "No such file: a.txt", "meta": {"ok": False, "duration_ms": 1}},
        {"content": DECLINED_TEXT, "meta": {"ok": True, "duration_ms": 1}},  # a file's text
    ]
    assert [result["declined"] for result in results(records)] == [True, True, False, False, False]
    assert results(records[:1]) == [
        {"ok": False, "output": "Deleted.", "duration_ms": 3, "declined": True}
    ]


def test_a_call_the_users_stop_cut_reads_as_cancelled_also_from_older_records() -> None:
    stopped = "Cancelled: the user stopped the task before this call finished."
    records = [
        {"content": stopped, "meta": {"ok": False, "duration_ms": 0, "cancelled": True}},
        {"content": stopped, "meta": {"ok": False, "duration_ms": 0}},  # before `cancelled`
        {"content": "No such file: a.txt", "meta": {"ok": False, "duration_ms": 1}},
        {"content": stopped, "meta": {"ok": True, "duration_ms": 1}},  # a file's text
        {"content": "Nothing to change.", "meta": {"ok": False, "unchanged": True}},
    ]
    read = results(records)
    assert [result.get("cancelled", False) for result in read] == [True, True, False, False, False]
    assert [result.get("unchanged", False) for result in read] == [False] * 4 + [True]
