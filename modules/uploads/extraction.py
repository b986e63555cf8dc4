"""An uploaded file's text for the model.

Text, CSV and source files are decoded here; PDF, DOCX, XLSX and PPTX are parsed by
modules/uploads/extract_worker.py in a child process with memory, CPU and wall-time limits, after
the zip-based ones passed the bomb checks of modules/uploads/file_types.py. Images and SQLite files
are recognised by their signature and described, never parsed.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field
from typing import Any

from modules.uploads.file_types import (
    OFFICE_MAIN,
    ExtractionError,
    Kind,
    check_zip,
    decode_text,
    identify,
    image_mime,
)
from utils.workers import Confine, run_worker

STORED_CHARS = 2_000_000  # the most text kept of one file; the model is shown a part of it
_OUTPUT_SLACK = 64 * 1024


@dataclass(frozen=True)
class Limits:
    """How big a file may be, how long and how much memory its parse may take, and where it
    runs (None: a plain child; modules/sandbox/worker_jail.py confines it)."""

    max_bytes: int = 25 * 1024 * 1024
    seconds: float = 20.0
    memory_bytes: int = 1024 * 1024 * 1024
    confine: Confine | None = None


@dataclass
class Extracted:
    """A file's text (or, for images and databases, none) and what was left out of it."""

    kind: Kind
    text: str = ""
    truncated: bool = False  # the text stops at STORED_CHARS or at a row/page cap
    note: str = ""  # e.g. "12 pages", "3 sheets; formulas shown with their cached values"
    mime: str = ""
    info: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Extracted:
        return cls(
            data["kind"],
            data.get("text", ""),
            bool(data.get("truncated")),
            data.get("note", ""),
            data.get("mime", ""),
            data.get("info") or {},
        )


def extract(name: str, data: bytes, limits: Limits) -> Extracted:
    """Check `data` (a file named `name`) and extract its text; raises ExtractionError."""
    label = os.path.basename(name) or "the file"
    if len(data) > limits.max_bytes:
        raise ExtractionError(
            f"{label} is {len(data) / 2**20:,.1f} MB; the limit is "
            f"{limits.max_bytes / 2**20:,.0f} MB.",
            "too_large",
        )
    kind = identify(name, data)
    if kind in ("text", "csv", "tsv"):
        text = decode_text(data, label)
        lines = text.count("\n") + (not text.endswith("\n") and bool(text))
        word = "line" if kind == "text" else "row"
        note = f"{lines:,} {word}{'' if lines == 1 else 's'}"
        return Extracted(kind, text[:STORED_CHARS], len(text) > STORED_CHARS, note)
    if kind == "image":
        return Extracted(kind, mime=image_mime(data))
    if kind == "sqlite":
        return Extracted(kind, note="query it with the sql_query tool")
    if kind in OFFICE_MAIN:
        check_zip(data, kind, label)
    return _run_worker(kind, data, limits, label)


def _run_worker(kind: Kind, data: bytes, limits: Limits, label: str) -> Extracted:
    args = [kind, str(STORED_CHARS), str(limits.memory_bytes), str(max(1, int(limits.seconds) + 1))]
    done = run_worker(
        "modules.uploads.extract_worker", args, data, limits.seconds, confine=limits.confine
    )
    if done.overdue:
        raise ExtractionError(
            f"Reading {label} took longer than {limits.seconds:g} s and was stopped; the file was "
            "refused.",
            "timeout",
        )
    if len(done.stdout) > STORED_CHARS * 4 + _OUTPUT_SLACK:
        raise ExtractionError(f"Reading {label} produced too much output.", "corrupt")
    try:
        answer = json.loads(done.stdout)
    except ValueError:
        if done.returncode < 0 or b"MemoryError" in done.stderr:
            raise ExtractionError(
                f"Reading {label} needed more than {limits.memory_bytes / 2**20:,.0f} MB of "
                "memory or CPU time and was stopped; the file was refused.",
                "memory",
            ) from None
        tail = done.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no output"]
        raise ExtractionError(f"Reading {label} failed: {tail[0][:300]}", "corrupt") from None
    if not answer.get("ok"):
        raise ExtractionError(f"{label}: {answer.get('error')}", answer.get("code", "corrupt"))
    return Extracted.from_json(answer["result"])
