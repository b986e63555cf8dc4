"""Proposed edits: a unified diff now, the write only when the user applies it.

Proposals are kept in `DATA_DIR/proposals/ID.json` until applied or discarded, so they
survive a restart. Applying records undo state in the journal of the task that proposed the
edit (or, without one, in a journal `proposal-ID` of its own), so undoing that task also
takes back the edits the user applied from it.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import stat
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from modules.results import ToolError
from modules.undo.blob_store import sha256_at
from modules.undo.journal import UndoJournal
from modules.workspace.paths import Workspace
from modules.workspace.text_files import EDIT_LIMIT_BYTES, read_text, split_keep_ends, unified_diff
from protocol.errors import ErrorCode
from protocol.event_values import FileChange
from utils.files import atomic_write

MAX_KEPT = 200


class ProposalError(ToolError):
    """A proposal that cannot be made, found or applied; `code` says which."""

    def __init__(
        self, message: str, code: ErrorCode = "invalid", details: dict[str, Any] | None = None
    ) -> None:
        super().__init__(message, details)
        self.code = code


@dataclass
class Proposal:
    id: str
    conversation_id: str
    task_id: str | None
    path: str
    new_content: str
    base_sha256: str | None
    diff: str
    created_at: float


def replace_lines(text: str, new: str, start: int | None, end: int | None, shown: str) -> str:
    """`text` with lines start..end (1-based, inclusive) replaced by `new`; whole without start."""
    if start is None:
        if end is not None:
            raise ProposalError("end_line needs start_line; omit both to replace the whole file.")
        return new
    lines = split_keep_ends(text)
    end = start if end is None else end
    if start > len(lines) + 1:
        raise ProposalError(f"start_line {start} is past the end of {shown} ({len(lines)} lines).")
    if end < start - 1 or end > len(lines):
        raise ProposalError(
            f"end_line {end} does not fit start_line {start} in {shown} ({len(lines)} lines): "
            "it must be between start_line - 1 (insert) and the last line."
        )
    head, removed, tail = lines[: start - 1], lines[start - 1 : end], lines[end:]
    if head and not head[-1].endswith("\n"):
        head[-1] += "\n"
    ends_line = bool(tail) or "".join(removed).endswith("\n")
    if new and not new.endswith("\n") and ends_line:
        new += "\n"
    return "".join(head) + new + "".join(tail)


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class ProposalStore:
    """Pending proposals of every conversation; apply or discard them by id. Thread-safe."""

    def __init__(self, data_dir: Path, workspace: Workspace, journal: UndoJournal) -> None:
        self.root = Path(data_dir) / "proposals"
        self.workspace = workspace
        self.journal = journal
        self._lock = threading.Lock()

    def propose(
        self,
        *,
        conversation_id: str,
        task_id: str | None,
        path: str,
        new_content: str,
        start_line: int | None = None,
        end_line: int | None = None,
    ) -> Proposal:
        """Work out the change and its diff, keep it, write nothing to the workspace."""
        target = self.workspace.resolve(path, for_write=True)
        rel = self.workspace.relative(target)
        info = self.workspace.lstat(rel, follow=True)
        if info is not None and stat.S_ISDIR(info.st_mode):
            raise ProposalError(f"{rel} is a folder; propose_edit changes a file.")
        old: str | None = None
        if info is not None:
            old = read_text(self.workspace, rel, EDIT_LIMIT_BYTES, strict=True)
        elif start_line is not None or end_line is not None:
            raise ProposalError(
                f"{rel} does not exist yet; omit start_line and end_line to "
                "propose it as a new file."
            )
        new = replace_lines(old or "", new_content, start_line, end_line, rel)
        if new == old:
            raise ProposalError(
                f"Nothing to change: the proposed text is what {rel} already holds.",
                details={"unchanged": True},
            )
        base = None if old is None else _sha256(old.encode("utf-8"))
        proposal = Proposal(
            secrets.token_hex(6),
            conversation_id,
            task_id,
            rel,
            new,
            base,
            unified_diff(old, new, rel),
            time.time(),
        )
        with self._lock:
            self._save(proposal)
            self._trim()
        return proposal

    def get(self, proposal_id: str) -> Proposal | None:
        """A pending proposal, or None."""
        where = self._where(proposal_id)
        try:
            return Proposal(**json.loads(where.read_text(encoding="utf-8")))
        except FileNotFoundError:
            return None

    def pending(self, conversation_id: str) -> list[Proposal]:
        """The conversation's pending proposals, oldest first."""
        found = [self.get(p.stem) for p in self._files()]
        mine = [p for p in found if p is not None and p.conversation_id == conversation_id]
        return sorted(mine, key=lambda p: p.created_at)

    def apply_proposal(self, proposal_id: str) -> FileChange:
        """Write the proposed content (refused if the file changed since); undoable."""
        with self._lock:
            proposal = self._require(proposal_id)
            ws = self.workspace
            try:
                target = ws.resolve(proposal.path, for_write=True)
                rel = ws.relative(target)
                info = ws.lstat(rel, follow=True)
                regular = info is not None and stat.S_ISREG(info.st_mode)
                current = sha256_at(ws, rel) if regular else None
            except ToolError as exc:
                raise ProposalError(str(exc)) from None
            if (info is not None and current is None) or current != proposal.base_sha256:
                raise ProposalError(
                    f"{proposal.path} changed since this edit was proposed; nothing was "
                    "written. Discard it and ask for a new proposal.",
                    "conflict",
                )
            task_id = proposal.task_id or f"proposal-{proposal.id}"
            journal = self.journal.task(proposal.conversation_id, task_id)
            written = [ws.root / f for f in ws.missing_folders(rel.rpartition("/")[0])]
            for folder in written:
                journal.before_change(folder)
                ws.mkdir(ws.relative(folder))
            journal.before_change(target)
            ws.write_atomic(rel, proposal.new_content.encode("utf-8"))
            journal.finish([*written, target])  # its task may have ended: what it left now
            self._where(proposal_id).unlink(missing_ok=True)
        event: Literal["created", "modified"] = (
            "created" if proposal.base_sha256 is None else "modified"
        )
        return FileChange(event, proposal.path)

    def discard_proposal(self, proposal_id: str) -> None:
        """Forget a pending proposal without writing anything."""
        with self._lock:
            self._require(proposal_id)
            self._where(proposal_id).unlink(missing_ok=True)

    def _require(self, proposal_id: str) -> Proposal:
        proposal = self.get(proposal_id)
        if proposal is None:
            raise ProposalError(
                f"No pending proposal {proposal_id!r}: it was applied, discarded, or never made.",
                "not_found",
            )
        return proposal

    def _where(self, proposal_id: str) -> Path:
        if not proposal_id.isalnum():
            raise ProposalError(f"Not a proposal id: {proposal_id!r}", "not_found")
        return self.root / f"{proposal_id}.json"

    def _files(self) -> list[Path]:
        try:
            return list(self.root.glob("*.json"))
        except FileNotFoundError:
            return []

    def _save(self, proposal: Proposal) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        atomic_write(self._where(proposal.id), json.dumps(asdict(proposal)))

    def _trim(self) -> None:
        files = sorted(self._files(), key=lambda p: p.stat().st_mtime_ns)
        for path in files[: max(0, len(files) - MAX_KEPT)]:
            path.unlink(missing_ok=True)
