"""A command's changes to Workspace Agent's own configuration, held until the user decides.

A command cannot say what it will write. Around each one the protected paths alone
(modules.workspace.protected: `.agents/`, `.mcp.json`, ...; a few files) are kept before and
looked at after, through the undo journal's keeper (a file the index knows is not read again).
What changed there is held: kept when the user approves it, else put back as it was through the
journal's restore. The task's journal records the command's changes as it does for any path,
so an undo of the task after a put-back finds those paths as they were and leaves them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

from modules.results import ToolError
from modules.undo.blob_store import State
from modules.undo.conflicts import state_now
from modules.undo.journal import UndoJournal
from modules.undo.keeper import Snapshot
from modules.undo.restore import action_for
from modules.workspace.protected import ProtectedPaths
from modules.workspace.text_files import SNIFF_BYTES, read_text, unified_diff

SHOWN_BYTES = 256 * 1024  # a file larger than this is named in the diff, not shown
_ASKING_TOOLS = (
    ": make them with create_file, modify_file, rename_file or delete_file, which ask for it.]"
)


@dataclass
class HeldChanges:
    """The protected paths one command changed, with what they held before it."""

    paths: list[str]
    reasons: list[str]  # why each changes the configuration, in the order of `paths`
    journal: UndoJournal
    before: Snapshot

    def diff(self) -> str:
        """What changed, path by path: a unified diff of a text file, else words."""
        return "".join(self._describe(rel) for rel in self.paths)

    def decide(self, approved: bool, *, can_ask: bool = True) -> str:
        """Keep the changes (approved) or put them back as they were; what the command's result
        then tells the model (`can_ask`: whether its file tools could ask the user)."""
        if approved:
            return (
                "\n[The user approved what this command changed in Workspace Agent's own "
                f"configuration: {_listed(self.paths)}.]"
            )
        result = self.journal.put_back(self.before, self.paths)
        note = ""
        if result.restored:
            note += (
                "\n[Put back as they were before this command, because these changes to "
                "Workspace Agent's own configuration were not approved: "
                f"{_listed(result.restored)}. Such changes need the user's approval"
                + (_ASKING_TOOLS if can_ask else ", which cannot be asked here.]")
            )
        if result.skipped:
            note += f"\n[Could not be put back: {'; '.join(result.skipped)}.]"
        return note

    def _describe(self, rel: str) -> str:
        old = self.journal.keeper.old_state(self.before, rel)
        new = state_now(self.journal.workspace, rel)
        kinds = {old["kind"], new["kind"]}
        if kinds <= {"file", "missing"}:
            with contextlib.suppress(_Unshown):
                texts = self._old_text(old), self._new_text(rel, new)
                return unified_diff(*texts, rel) or f"{rel}: only its mode changed\n"
        if kinds == {"dir"}:
            return f"{rel}/: only its mode changed\n"
        return f"{rel}: {_said(old)} before, {_said(new)} now\n"

    def _old_text(self, state: State) -> str | None:
        if state["kind"] == "missing":
            return None
        if state["size"] > SHOWN_BYTES or not self.journal.blobs.has(state["blob"]):
            raise _Unshown
        return _text(self.journal.blobs.path(state["blob"]).read_bytes())

    def _new_text(self, rel: str, state: State) -> str | None:
        if state["kind"] == "missing":
            return None
        try:
            return read_text(self.journal.workspace, rel, SHOWN_BYTES, strict=True)
        except (ToolError, OSError):
            raise _Unshown from None


class ConfigWatch:
    """Holds what commands change in the protected paths of one workspace."""

    def __init__(self, journal: UndoJournal, protected: ProtectedPaths) -> None:
        self.journal = journal
        self.protected = protected
        self.tops = protected.tops()

    @contextlib.contextmanager
    def around(self) -> Iterator[Watch]:
        """Keep the protected paths now; inside, `changes()` says what a command did to them."""
        before = self.journal.keep_paths(self.tops)
        try:
            yield Watch(self, before)
        finally:
            self.journal.release(before)


@dataclass
class Watch:
    """The protected paths as one command found them."""

    owner: ConfigWatch
    before: Snapshot

    def changes(self) -> HeldChanges | None:
        """What the command changed in the protected paths; None when nothing."""
        journal = self.owner.journal
        paths = [
            rel
            for rel in journal.changed_paths(self.before, self.owner.tops)
            if action_for(journal.workspace, rel, journal.keeper.old_state(self.before, rel))
        ]  # a file touched or written again with the same bytes is no change
        if not paths:
            return None
        reasons = [self.owner.protected.reason(rel) or rel for rel in paths]
        return HeldChanges(paths, reasons, journal, self.before)


class _Unshown(Exception):
    """A file the diff names but does not show: binary, too large, or its copy is gone."""


def _text(data: bytes) -> str:
    if b"\x00" in data[:SNIFF_BYTES]:
        raise _Unshown
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise _Unshown from None


def _listed(paths: list[str], shown: int = 20) -> str:
    more = f" and {len(paths) - shown} more" if len(paths) > shown else ""
    return ", ".join(paths[:shown]) + more


def _said(state: State) -> str:
    kind = state["kind"]
    if kind == "missing":
        return "absent"
    if kind == "dir":
        return "a folder"
    if kind == "symlink":
        return f"a link to {state['target']}"
    if kind == "file":
        return f"a file of {state['size']:,} bytes"
    return f"not readable here ({state['reason']})"
