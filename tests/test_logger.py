"""The JSON-lines log: context fields, extra fields, exceptions and redaction."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from tests.kit.waits import wait_until
from utils.logger import JsonLinesHandler, log_context, setup_logging


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_records_carry_context_fields_and_exceptions(tmp_path: Path) -> None:
    setup_logging(tmp_path, redact_content=False)
    log = logging.getLogger("tests.logger")
    with log_context(trace_id="t1", conversation_id="c1"):
        log.info("hello", extra={"fields": {"latency_ms": 12}})
        try:
            raise ZeroDivisionError("boom")
        except ZeroDivisionError:
            log.exception("it failed")
    log.info("outside")
    hello, failed, outside = _records(tmp_path / "agent.jsonl")[-3:]
    assert (hello["trace_id"], hello["conversation_id"], hello["latency_ms"]) == ("t1", "c1", 12)
    assert hello["module"] == "tests.logger" and hello["level"] == "info" and hello["time"]
    assert failed["level"] == "error" and "ZeroDivisionError: boom" in failed["exception"]
    assert "trace_id" not in outside


def test_redaction_keeps_only_a_head_and_a_digest(tmp_path: Path) -> None:
    stream = setup_logging(tmp_path, redact_content=True)
    secret = "x" * 70 + "TAIL-SECRET"
    logging.getLogger("tests.logger").info("task", extra={"fields": {"prompt": secret}})
    stream('{"choices": [{"delta": {"content": "TAIL-SECRET"}}]}')
    stream.flush()
    record = _records(tmp_path / "agent.jsonl")[-1]
    assert record["prompt"]["head"] == secret[:64] and len(record["prompt"]["sha256"]) == 64
    assert "TAIL-SECRET" not in (tmp_path / "agent.jsonl").read_text()
    assert "TAIL-SECRET" not in (tmp_path / "debug_stream.log").read_text()


def test_the_stream_log_reaches_the_disk_without_an_explicit_flush(tmp_path: Path) -> None:
    stream = setup_logging(tmp_path, redact_content=False)
    stream('{"choices": []}')
    wait_until(
        lambda: "choices" in (tmp_path / "debug_stream.log").read_text(),
        2,
        "the delta to reach the file",
        every=0.05,
    )


def test_a_full_disk_loses_the_line_without_a_traceback_on_the_terminal(
    capsys: pytest.CaptureFixture[str],
) -> None:
    handler = JsonLinesHandler(Path("/dev/full"), redact_content=False)  # every write: ENOSPC
    try:
        handler.handle(logging.makeLogRecord({"msg": "a line the disk has no room for"}))
    finally:
        handler.close()
    assert "Logging error" not in capsys.readouterr().err
