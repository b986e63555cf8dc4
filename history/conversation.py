"""One conversation tree (docs/protocol.md §5): records indexed in memory, messages.jsonl appended
one line per record, meta.json replaced atomically and merged with other processes' writes."""

from __future__ import annotations

import copy
import json
import logging
import os
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, Unpack

from history.message_record import RecordFields, is_valid_id, message_record, utc_now
from history.meta_file import merged_meta, read_meta
from history.titles import title_from
from protocol.records import (
    ConversationMeta,
    ConversationState,
    MessageRecord,
    Role,
    ToolCallRecord,
)
from utils.errors import NotFound
from utils.files import atomic_write, directory_lock
from utils.text import shown

log = logging.getLogger(__name__)

# meta.json is rewritten on every change but a bare `updated_at` bump, which waits up to this
# long (an atomic replace costs ~0.2-1 ms on ext4, far more than appending a record).
META_SAVE_INTERVAL = 1.0
LEAF: Any = object()  # parent_id default: hang the record under the current leaf


class MessageNotFound(NotFound):
    """No message in this conversation has this id."""


Stamp = tuple[int, int, int]  # meta.json's (inode, mtime_ns, size): a rewrite changes it


def write_meta(directory: Path, meta: ConversationMeta) -> Stamp:
    """Replace meta.json atomically (write a temporary file, then `os.replace`).

    Not synced to disk, as messages.jsonl's appends are not: a crash that leaves meta.json
    empty has it rebuilt from the messages, and an fsync on a busy disk can take many
    milliseconds, on the way to every send_message's answer."""
    data = json.dumps(meta, ensure_ascii=False)
    return _stamp(atomic_write(directory / "meta.json", data, durable=False))


def _stamp(info: os.stat_result) -> Stamp:
    return info.st_ino, info.st_mtime_ns, info.st_size


def _stamp_of(path: Path) -> Stamp | None:
    try:
        return _stamp(os.stat(path))
    except OSError:
        return None


class Conversation:
    """One conversation tree: its meta, its records in append order and an in-memory index."""

    def __init__(
        self,
        directory: Path,
        meta: ConversationMeta,
        records: list[MessageRecord],
        needs_newline: bool = False,
        stamp: Stamp | None = None,
    ) -> None:
        """`stamp`: meta.json's when it holds `meta` (None: unknown, read it before a save)."""
        self._dir = directory
        self._meta = meta
        self._meta_base = copy.deepcopy(meta)  # meta.json as this object last read or wrote it
        self._meta_stamp = stamp
        self._records: list[MessageRecord] = []
        self._by_id: dict[str, MessageRecord] = {}
        self._children: dict[str | None, list[str]] = {}
        self._needs_newline = needs_newline
        self._last_path: list[MessageRecord] = []  # path() reuses it while the leaf grows
        self._meta_saved_at = float("-inf") if stamp is None else time.monotonic()
        self._meta_dirty = False
        self._lock = threading.RLock()
        for record in records:
            self._index(record)

    @property
    def id(self) -> str:
        return self._meta["id"]

    @property
    def meta(self) -> ConversationMeta:
        """A copy of meta.json's content."""
        with self._lock:
            return copy.deepcopy(self._meta)

    def current_meta(self) -> ConversationMeta:
        """A copy of meta.json's content with what another process wrote there since merged in
        (one stat when nobody did)."""
        with self._lock:
            stamp = _stamp_of(self._dir / "meta.json")
            if stamp is not None and stamp != self._meta_stamp:
                disk = read_meta(self._dir, quiet=True)
                if disk is not None:
                    if disk != self._meta_base:
                        self._meta = merged_meta(disk, self._meta_base, self._meta)
                    self._meta_base, self._meta_stamp = disk, stamp
            return copy.deepcopy(self._meta)

    @property
    def records(self) -> list[MessageRecord]:
        """Every record in append order (shared dicts: do not mutate them)."""
        with self._lock:
            return list(self._records)

    @property
    def leaf_id(self) -> str | None:
        """The id of the most recently appended record."""
        with self._lock:
            return self._records[-1]["id"] if self._records else None

    @property
    def index(self) -> Mapping[str, MessageRecord]:
        """A read-only view of the records by id."""
        return MappingProxyType(self._by_id)

    def __len__(self) -> int:
        return len(self._records)

    def get(self, message_id: str) -> MessageRecord:
        """One record by id; raises MessageNotFound."""
        record = self._by_id.get(message_id)
        if record is None:
            raise MessageNotFound(f"no message {shown(message_id)} in conversation {self.id}")
        return record

    def append(
        self,
        role: Role,
        content: str | None = "",
        *,
        parent_id: str | None = LEAF,
        **fields: Unpack[RecordFields],
    ) -> MessageRecord:
        """Record a message under `parent_id` (default: the leaf); `id=` may fix its id."""
        with self._lock:
            if parent_id is LEAF:
                parent_id = self._records[-1]["id"] if self._records else None
            parent = None if parent_id is None else self.get(parent_id)
            if (wanted := fields.get("id")) is not None:
                self._check_new_id(wanted)
            version = len(self._children.get(parent_id, ())) + 1
            record = message_record(
                self.id, role, content, parent=parent, version=version, **fields
            )
            self._write_line(record)
            self._index(record)
            self._meta["updated_at"] = record["created_at"]
            titled = self._auto_title(record)
            try:
                self._save_meta(force=titled)
            except OSError:  # the record is kept all the same: meta.json waits for the next save
                self._meta_dirty = True
                log.warning(
                    "meta.json not written", extra={"fields": {"id": self.id}}, exc_info=True
                )
            return record

    def _check_new_id(self, wanted: str) -> None:
        if not is_valid_id(wanted) or wanted in self._by_id:
            raise ValueError(f"message id {wanted!r} is invalid or already used")

    def path(self, leaf_id: str | None = None) -> list[MessageRecord]:
        """The records from the root down to `leaf_id` (default: the current leaf)."""
        with self._lock:
            if leaf_id is None:
                leaf_id = self.leaf_id
            if leaf_id is None:
                return []
            record = self.get(leaf_id)
            last = self._last_path
            depth = record.get("depth")
            if isinstance(depth, int) and 0 <= depth < len(last) and last[depth] is record:
                self._last_path = last[: depth + 1]  # an ancestor of the last path's leaf
                return list(self._last_path)
            known = last[-1]["id"] if last else None
            walked: list[MessageRecord] = []
            step: MessageRecord | None = record
            while step is not None and step["id"] != known:
                walked.append(step)
                step = self._parent_of(step)
            walked.reverse()
            self._last_path = (last if step is not None else []) + walked
            return list(self._last_path)

    def _parent_of(self, record: MessageRecord) -> MessageRecord | None:
        parent = record.get("parent_id")
        if parent is None:
            return None
        found = self._by_id.get(parent)
        if found is None:
            log.warning(
                "history path stops at a missing parent",
                extra={"fields": {"conversation_id": self.id, "parent": parent}},
            )
        return found

    def unanswered_calls(self, leaf_id: str | None = None) -> list[ToolCallRecord]:
        """The tool calls without a result at the end of the path to `leaf_id` (default: the
        leaf): those of its last assistant record when only results follow it there, so the
        missing results can still be appended under `leaf_id`."""
        with self._lock:
            if leaf_id is None:
                leaf_id = self.leaf_id
            record = self._by_id.get(leaf_id) if leaf_id is not None else None
            answered = set()
            while record is not None and record["role"] == "tool":
                answered.add(record.get("tool_call_id"))
                record = self._parent_of(record)
            if record is None or record["role"] != "assistant":
                return []
            return [c for c in record.get("tool_calls") or () if c.get("id") not in answered]

    def children(self, message_id: str | None) -> list[MessageRecord]:
        """The records hanging directly under `message_id` (None: the roots), oldest first."""
        with self._lock:
            return [self._by_id[i] for i in self._children.get(message_id, ())]

    def siblings(self, message_id: str) -> list[MessageRecord]:
        """The records sharing `message_id`'s parent, itself included, by version."""
        with self._lock:
            return self.children(self.get(message_id).get("parent_id"))

    def set_title(self, title: str) -> None:
        """Rename the conversation; the first answer no longer changes its title."""
        with self._lock:
            self._meta["title"] = title
            self._meta["updated_at"] = utc_now()
            self._meta["meta"]["title_by_user"] = True
            self._save_meta()

    def _auto_title(self, record: MessageRecord) -> bool:
        """Title a new conversation from its first message, then refine it with the first
        answer (unless the user renamed it); True when the title changed."""
        meta, content = self._meta, record["content"]
        if not content.strip() or meta["meta"].get("title_by_user"):
            return False
        if record["role"] == "user" and not meta.get("title"):
            meta["title"] = title_from(content)
            return True
        if record["role"] != "assistant" or len(self._records) > 2:
            return False
        first = self._records[0]
        if first["role"] != "user" or meta.get("title") != title_from(first["content"]):
            return False  # a title given at creation stays
        refined = title_from(first["content"], content)
        if refined == meta.get("title"):
            return False
        meta["title"] = refined
        return True

    def update_meta(self, *, save: bool = True, **meta: Unpack[ConversationState]) -> None:
        """Merge keys into meta.json's free-form `meta` object; `save=False` leaves the write
        to the next save (or `flush`), for a caller that knows one follows."""
        with self._lock:
            self._meta["meta"].update(meta)
            if save:
                self._save_meta()
            else:
                self._meta_dirty = True

    def _index(self, record: MessageRecord) -> None:
        if record["id"] in self._by_id:
            log.warning(
                "ignored a duplicate message id",
                extra={"fields": {"conversation_id": self.id, "message_id": record["id"]}},
            )
            return
        self._records.append(record)
        self._by_id[record["id"]] = record
        self._children.setdefault(record.get("parent_id"), []).append(record["id"])

    def _write_line(self, record: MessageRecord) -> None:
        data = (json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n").encode()
        if self._needs_newline:
            data = b"\n" + data  # end a line torn by a crash so this record starts fresh
        fd = os.open(self._dir / "messages.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        torn, written = self._needs_newline, 0
        try:
            self._needs_newline = True  # until the whole line is known to be on disk
            while written < len(data):
                written += os.write(fd, data[written:])
            self._needs_newline = False
        except OSError:  # a full disk: a record is kept whole or not at all
            os.ftruncate(fd, os.fstat(fd).st_size - written)
            self._needs_newline = torn
            raise
        finally:
            os.close(fd)

    def flush(self) -> None:
        """Write meta.json now if an `updated_at` bump is still waiting."""
        with self._lock:
            if self._meta_dirty:
                self._save_meta()

    def _save_meta(self, *, force: bool = True) -> None:
        now = time.monotonic()
        if not force and now - self._meta_saved_at < META_SAVE_INTERVAL:
            self._meta_dirty = True
            return
        with directory_lock(self._dir):  # several server processes share it (AGENT_REDIS_URL)
            stamp = _stamp_of(self._dir / "meta.json")
            if stamp is None or stamp != self._meta_stamp:  # unknown, or another process wrote it
                disk = read_meta(self._dir, quiet=True)
                if disk is not None and disk != self._meta_base:
                    self._meta = merged_meta(disk, self._meta_base, self._meta)
            self._meta_stamp = write_meta(self._dir, self._meta)
        self._meta_base = copy.deepcopy(self._meta)
        self._meta_saved_at, self._meta_dirty = now, False
