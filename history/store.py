"""All conversations on disk (docs/protocol.md §5): create, load (rebuilding lost meta.json), list,
search and delete them; history/conversation.py holds one conversation's tree."""

from __future__ import annotations

import builtins
import contextlib
import json
import logging
import os
import shutil
import threading
from pathlib import Path
from typing import cast

from history.conversation import Conversation, write_meta
from history.message_record import is_valid_id, new_id, utc_now
from history.meta_file import read_meta
from history.snippets import plain_text, snippet_parts
from history.titles import title_from
from protocol.records import ConversationHit, ConversationMeta, ConversationState, MessageRecord
from utils.errors import NotFound
from utils.text import shown

log = logging.getLogger(__name__)


class ConversationNotFound(NotFound):
    """No conversation has this id (or the id is not a valid one)."""


def _read_records(path: Path, conversation_id: str) -> tuple[list[MessageRecord], bool]:
    """Parse messages.jsonl; returns the records and whether the file lacks a final newline."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return [], False
    records: list[MessageRecord] = []
    for number, line in enumerate(data.split(b"\n"), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            if not (isinstance(record, dict) and is_valid_id(record.get("id"))):
                raise ValueError("not a message record")
        except ValueError as exc:
            fields = {"conversation_id": conversation_id, "line": number, "error": str(exc)[:200]}
            log.warning("skipped an unreadable history line", extra={"fields": fields})
            continue
        records.append(cast(MessageRecord, record))  # an object with an id: not checked further
    return records, bool(data) and not data.endswith(b"\n")


class ConversationStore:
    """All conversations under `DATA_DIR/conversations`; each is loaded once and cached."""

    def __init__(self, data_dir: Path) -> None:
        self._root = Path(data_dir) / "conversations"
        self._lock = threading.Lock()
        self._cache: dict[str, Conversation] = {}

    def create(
        self,
        title: str | None = None,
        agent_type: str = "workspace",
        meta: ConversationState | None = None,
    ) -> Conversation:
        """Start an empty conversation (its messages.jsonl comes with the first record)."""
        now = utc_now()
        data: ConversationMeta = {
            "id": new_id(),
            "title": title,
            "agent_type": agent_type,
            "created_at": now,
            "updated_at": now,
            "meta": meta.copy() if meta else {},
        }
        directory = self._root / data["id"]
        directory.mkdir(parents=True)
        try:
            stamp = write_meta(directory, data)
        except OSError:  # a full disk: no empty folder is left behind
            with contextlib.suppress(OSError):
                directory.rmdir()
            raise
        conversation = Conversation(directory, data, [], stamp=stamp)
        with self._lock:
            self._cache[conversation.id] = conversation
        return conversation

    def get(self, conversation_id: str) -> Conversation:
        """The conversation with this id; raises ConversationNotFound."""
        with self._lock:
            cached = self._cache.get(conversation_id)
        if cached is not None:
            return cached
        conversation = self._load(conversation_id)
        with self._lock:
            return self._cache.setdefault(conversation_id, conversation)

    def version(self, conversation_id: str) -> tuple[int, int]:
        """What changes whenever any process writes the conversation: the size of its
        messages (appended only) and a hash of meta.json (small; its mtime may not move
        between two writes in one clock tick); (-1, -1) if absent."""
        directory = self._root / conversation_id
        try:
            return (
                (directory / "messages.jsonl").stat().st_size,
                hash((directory / "meta.json").read_bytes()),
            )
        except (OSError, ValueError):
            return -1, -1

    def reload(self, conversation_id: str) -> Conversation:
        """Read the conversation from disk again (another process wrote it); raises
        ConversationNotFound. Whoever holds the old object keeps a stale copy."""
        conversation = self._load(conversation_id)
        with self._lock:
            self._cache[conversation_id] = conversation
        return conversation

    def exists(self, conversation_id: str) -> bool:
        """Whether a conversation with this id is stored."""
        return (
            is_valid_id(conversation_id) and (self._root / conversation_id / "meta.json").is_file()
        )

    def list(self) -> builtins.list[ConversationMeta]:
        """Every conversation's meta, most recently updated first (messages are not loaded)."""
        if not self._root.is_dir():
            return []
        with self._lock:
            loaded = dict(self._cache)
        metas: builtins.list[ConversationMeta] = []
        for directory in self._root.iterdir():
            if directory.name in loaded:
                metas.append(loaded[directory.name].current_meta())
            elif is_valid_id(directory.name):
                meta = read_meta(directory)
                if meta is not None:
                    metas.append(meta)
        metas.sort(key=lambda m: str(m.get("updated_at") or ""), reverse=True)
        return metas

    def delete(self, conversation_id: str) -> None:
        """Remove a conversation and its messages for good; raises ConversationNotFound."""
        if not self.exists(conversation_id):
            raise ConversationNotFound(f"no conversation {shown(conversation_id)}")
        directory = self._root / conversation_id
        trash = directory.with_name(f".{conversation_id}.deleted")  # gone from list() at once
        os.replace(directory, trash)
        with self._lock:
            self._cache.pop(conversation_id, None)
        shutil.rmtree(trash, ignore_errors=True)

    def search(self, query: str, limit: int = 50) -> builtins.list[ConversationHit]:
        """Conversations whose title or messages contain `query` (case-insensitive), most
        recently updated first; each meta gets `snippet`, the words around the hit as they read
        (Markdown's markup out), and `snippet_parts`, the snippet cut at each hit (odd items)."""
        needle = query.casefold().strip()
        found: builtins.list[ConversationHit] = []
        for meta in self.list():
            title = str(meta.get("title") or "")
            if needle in title.casefold():
                found.append({**meta, "snippet": "", "snippet_parts": []})
            elif (parts := self._find_in_messages(str(meta["id"]), needle)) is not None:
                found.append({**meta, "snippet": "".join(parts), "snippet_parts": parts})
            if len(found) >= limit:
                break
        return found

    def _find_in_messages(self, conversation_id: str, needle: str) -> builtins.list[str] | None:
        path = self._root / conversation_id / "messages.jsonl"
        try:
            data = path.read_bytes()
        except OSError:
            return None
        # Markup may lie between the words the page shows ("[divide](url) function"), never
        # inside one: a message that holds the text holds each of its words.
        words = needle.split()
        plain = needle.isascii() and needle.isprintable() and not any(c in needle for c in '"\\')
        lowered = data.lower() if plain else b""
        if plain and not all(word.encode() in lowered for word in words):
            return None  # the common case: no line holds it, so none is parsed
        for line in data.split(b"\n"):
            try:
                record = json.loads(line) if line.strip() else None
            except ValueError:
                continue
            if not isinstance(record, dict) or record.get("role") not in ("user", "assistant"):
                continue
            if {"plan_prompt", "plan_step"} & set(record.get("meta") or {}):
                continue  # what a plan_execute agent told itself
            content = str(record.get("content") or "")
            folded = content.casefold()
            if not all(word in folded for word in words):
                continue
            # As the page shows it; as written when the searched text is markup itself.
            for text in (plain_text(content), " ".join(content.split()), content):
                if (parts := snippet_parts(text, needle)) is not None:
                    return parts
        return None

    def flush(self) -> None:
        """Write every pending meta.json (call at shut-down; a crash loses at most ~1 s)."""
        with self._lock:
            loaded = list(self._cache.values())
        for conversation in loaded:
            conversation.flush()

    def _load(self, conversation_id: str) -> Conversation:
        if not self.exists(conversation_id):
            raise ConversationNotFound(f"no conversation {shown(conversation_id)}")
        directory = self._root / conversation_id
        records, needs_newline = _read_records(directory / "messages.jsonl", conversation_id)
        meta = read_meta(directory)
        if meta is None:
            log.error(
                "rebuilt meta.json from the messages", extra={"fields": {"id": conversation_id}}
            )
            meta = _recovered_meta(conversation_id, records)
            write_meta(directory, meta)
        meta["id"] = conversation_id
        meta.setdefault("meta", {})
        if records and str(records[-1].get("created_at", "")) > str(meta.get("updated_at", "")):
            meta["updated_at"] = records[-1]["created_at"]  # a bump that was not saved yet
        return Conversation(directory, meta, records, needs_newline)


def _recovered_meta(conversation_id: str, records: list[MessageRecord]) -> ConversationMeta:
    first_user = next((r for r in records if r.get("role") == "user"), None)
    created = records[0].get("created_at") if records else utc_now()
    return {
        "id": conversation_id,
        "title": title_from(str(first_user.get("content") or "")) if first_user else None,
        "agent_type": "workspace",
        "created_at": created,
        "updated_at": records[-1].get("created_at") if records else created,
        "meta": {},
    }
