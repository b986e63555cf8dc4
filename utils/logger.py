"""Structured logs: `agent.jsonl` (a JSON object per record) and `debug_stream.log` (raw deltas)."""

from __future__ import annotations

import contextlib
import contextvars
import errno
import hashlib
import json
import logging
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REDACTED_FIELDS = ("prompt", "reply", "reasoning")
REDACT_KEEP_CHARS = 64

_context: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar(
    "log_context", default=None
)


@contextlib.contextmanager
def log_context(**fields: Any) -> Iterator[None]:
    """Attach fields (trace_id, conversation_id, ...) to every record logged inside the block."""
    token = _context.set({**(_context.get() or {}), **fields})
    try:
        yield
    finally:
        _context.reset(token)


def redact(text: str) -> dict[str, Any]:
    """The first 64 characters and a SHA-256 of `text`."""
    digest = hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()
    return {"head": text[:REDACT_KEEP_CHARS], "sha256": digest, "chars": len(text)}


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class JsonLinesHandler(logging.Handler):
    """Writes each record as one JSON line, context and `extra={"fields": ...}` merged in."""

    def __init__(self, path: Path, *, redact_content: bool) -> None:
        super().__init__(logging.INFO)
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file = path.open("a", encoding="utf-8")
        self._redact = redact_content

    def emit(self, record: logging.LogRecord) -> None:
        try:
            entry: dict[str, Any] = {
                "time": _now(),
                "level": record.levelname.lower(),
                "module": record.name,
                "message": record.getMessage(),
            }
            entry.update(_context.get() or {})
            entry.update(getattr(record, "fields", {}) or {})
            if record.exc_info:
                entry["exception"] = "".join(traceback.format_exception(*record.exc_info))
            if self._redact:
                for key in REDACTED_FIELDS:
                    if isinstance(entry.get(key), str):
                        entry[key] = redact(entry[key])
            line = json.dumps(entry, ensure_ascii=False, default=str) + "\n"
            with self.lock or contextlib.nullcontext():
                self._file.write(line)
                self._file.flush()
        except OSError as exc:
            if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                self.handleError(record)
            # a full disk: the line is lost, and the user is told of the disk, not of the log
        except Exception:
            self.handleError(record)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._file.close()
        super().close()


_encode_string: Callable[[str], str] = json.encoder.encode_basestring  # the C one: no dispatch


def _encode_value(value: Any) -> str:
    return "null" if value is None else _encode_string(str(value))


class DebugStreamLog:
    """Appends every raw model delta, one JSON line each, tagged with the task's context.

    The stream's thread only queues the delta with its context; a background thread formats
    and writes what queued at most FLUSH_SECONDS apart, so neither a slow disk nor the JSON
    encoding ever holds up a token (a write and flush per delta cost more than everything else
    the stream does).
    """

    FLUSH_SECONDS = 0.2

    def __init__(self, path: Path, *, redact_content: bool) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._file = path.open("a", encoding="utf-8")
        self._writing = threading.Lock()  # one writer of the file at a time
        # deque appends and pops are atomic: the stream threads never wait on a lock here
        self._queued: deque[tuple[float, dict[str, Any], str]] = deque()
        self._redact = redact_content
        self._closed = False
        threading.Thread(target=self._flush_loop, name="debug-stream-flush", daemon=True).start()

    def __call__(self, raw: str) -> None:
        if not self._closed:
            self._queued.append((time.time(), _context.get() or {}, raw))

    def flush(self) -> None:
        """Write what is queued now (a full disk loses some: a debug log stops nothing)."""
        with self._writing:
            queued = [self._queued.popleft() for _ in range(len(self._queued))]
            if queued and not self._file.closed:
                with contextlib.suppress(OSError):
                    self._file.write(self._lines(queued))
                    self._file.flush()

    def _lines(self, queued: list[tuple[float, dict[str, Any], str]]) -> str:
        # By hand with one string encoder: `json.dumps` of a dict costs three times as much.
        ids: dict[int, str] = {}  # a task's deltas share one context: its ids once
        lines = []
        for at, ctx, raw in queued:
            if self._redact:  # a delta is short: even its first characters would be the reply
                shown = json.dumps({k: v for k, v in redact(raw).items() if k != "head"})
            else:
                shown = _encode_string(raw)
            named = ids.get(id(ctx))
            if named is None:
                named = ids[id(ctx)] = (
                    f'"conversation_id": {_encode_value(ctx.get("conversation_id"))}, '
                    f'"message_id": {_encode_value(ctx.get("message_id"))}'
                )
            lines.append(f'{{"t": {at:.3f}, {named}, "raw": {shown}}}\n')
        return "".join(lines)

    def _flush_loop(self) -> None:
        while not self._closed:
            time.sleep(self.FLUSH_SECONDS)
            self.flush()

    def close(self) -> None:
        self._closed = True
        self.flush()
        with self._writing, contextlib.suppress(OSError):
            self._file.close()


def setup_logging(logs_dir: Path, *, redact_content: bool) -> DebugStreamLog:
    """Route all logging to `agent.jsonl` (replacing an earlier setup) and open the debug stream."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        if isinstance(handler, JsonLinesHandler):
            root.removeHandler(handler)
            handler.close()
    root.addHandler(JsonLinesHandler(logs_dir / "agent.jsonl", redact_content=redact_content))
    if root.level == logging.NOTSET or root.level > logging.INFO:
        root.setLevel(logging.INFO)
    for noisy in (
        "httpx",
        "httpx2",
        "httpcore",
        "httpcore2",
        "openai",
        "werkzeug",
        "engineio",
        "socketio",
        "watchdog",
        "urllib3",
        "docker",
    ):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    return DebugStreamLog(logs_dir / "debug_stream.log", redact_content=redact_content)
