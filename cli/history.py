"""Naming a stored conversation in the terminal: `/history` lists them numbered, and one is
opened by its number in that list, its whole id, or a prefix of the id only it has. The
local session reads the store; `cli --server` the server's `list_conversations`."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from history.store import ConversationNotFound, ConversationStore

LISTED = 20  # conversations `/history` shows, newest first
Row = Mapping[str, object]  # a conversation's meta: id, title, updated_at, ...


def listing(store: ConversationStore) -> tuple[str, list[str]]:
    """The numbered list `/history` prints, and the ids in its order."""
    return format_listing(store.list())


def format_listing(rows: Sequence[Row]) -> tuple[str, list[str]]:
    """The numbered list of the newest LISTED of `rows` (newest first), and their ids."""
    rows = rows[:LISTED]
    if not rows:
        return "no conversations yet", []
    width = len(str(len(rows)))
    lines = [
        f"{number:>{width}}  {meta['id']}  {str(meta.get('updated_at') or '')[:16]}  {_title(meta)}"
        for number, meta in enumerate(rows, 1)
    ]
    lines.append("/history N or /history ID (or the start of it) opens one")
    return "\n".join(lines), [str(meta["id"]) for meta in rows]


def find_conversation(store: ConversationStore, ref: str, listed: list[str] | None = None) -> str:
    """The id `ref` names in the store (see pick_conversation)."""
    return pick_conversation(ref, store.list(), listed, store.exists)


def pick_conversation(
    ref: str, rows: Sequence[Row], listed: list[str] | None, exists: Callable[[str], bool]
) -> str:
    """The id `ref` names: a whole id, the start of exactly one id of `rows` (newest first),
    or, given the ids the last `/history` list showed (`listed`, [] before any), a number of
    that list (one or two digits). ConversationNotFound says why none is chosen."""
    ref = ref.strip()
    if listed is not None and ref.isdigit() and len(ref) <= len(str(LISTED)):
        number = int(ref)
        if not listed:
            listed = [str(meta["id"]) for meta in rows[:LISTED]]
        if not 1 <= number <= len(listed):
            raise ConversationNotFound(
                f"no conversation number {number}: /history lists {len(listed)}"
            )
        return listed[number - 1]
    if exists(ref):
        return ref
    wanted = ref.lower()
    matches = [m for m in rows if ref and str(m["id"]).lower().startswith(wanted)]
    if len(matches) == 1:
        return str(matches[0]["id"])
    if not matches:
        raise ConversationNotFound(f"no conversation {ref!r} (/history lists them)")
    shown = "; ".join(f"{meta['id']} {_title(meta)}" for meta in matches[:5])
    more = f" and {len(matches) - 5} more" if len(matches) > 5 else ""
    raise ConversationNotFound(
        f"{ref!r} starts {len(matches)} conversation ids: {shown}{more}; type more of it"
    )


def _title(meta: Row) -> str:
    return str(meta.get("title") or "(untitled)")
