"""The words around a search hit in a message, as a reader sees them: Markdown's markup taken
out, cut at whole words, each occurrence of the searched text set apart (`list_conversations`,
docs/protocol.md §4.1)."""

from __future__ import annotations

import re

SNIPPET_BEFORE = 60  # characters of context before the first hit, about
SNIPPET_AFTER = 100  # and after it
ELLIPSIS = "…"

_FENCE = re.compile(r"^\s{0,3}(```|~~~)")
_RULE = re.compile(r"^\s{0,3}([-*_])(\s*\1){2,}\s*$")
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$")
_BLOCK_PREFIX = re.compile(
    r"^\s{0,3}(?:>\s?)*(?:#{1,6}\s+|[-*+]\s+(?:\[[ xX]\]\s+)?|\d{1,9}[.)]\s+(?:\[[ xX]\]\s+)?)?"
)
_CODE_SPAN = re.compile(r"(`+)(.+?)\1")
_IMAGE = re.compile(r"!\[([^\]]*)\]\([^)]*\)")
_LINK = re.compile(r"\[([^\]]+)\]\([^)]*\)")
_AUTOLINK = re.compile(r"<((?:https?|mailto):[^>\s]+)>")
_EMPHASIS = re.compile(
    r"\*\*|~~|(?<![\w*])\*(?=\S)|(?<=\S)\*(?![\w*])|(?<!\w)__?(?=\S)|(?<=\S)__?(?!\w)"
)
_ESCAPE = re.compile(r"\\([\\`*_{}\[\]()#+\-.!|~>])")


def plain_text(markdown: str) -> str:
    """What a Markdown message reads as: no fences, heading marks, quote marks, list bullets,
    table pipes, emphasis or link targets; code keeps its text. Whitespace is collapsed."""
    lines: list[str] = []
    for line in markdown.splitlines():
        if _FENCE.match(line) or _RULE.match(line) or _TABLE_RULE.match(line):
            continue
        lines.append(_inline(_BLOCK_PREFIX.sub("", line, count=1)).replace("|", " "))
    return " ".join(" ".join(lines).split())


def _inline(line: str) -> str:
    codes: list[str] = []

    def keep_code(match: re.Match[str]) -> str:
        codes.append(match.group(2).strip())
        return f"\x00{len(codes) - 1}\x00"

    text = _CODE_SPAN.sub(keep_code, line)
    text = _IMAGE.sub(r"\1", text)
    text = _LINK.sub(r"\1", text)
    text = _AUTOLINK.sub(r"\1", text)
    text = _EMPHASIS.sub("", text)
    text = _ESCAPE.sub(r"\1", text)
    return re.sub(r"\x00(\d+)\x00", lambda m: codes[int(m.group(1))], text)


def find_all(text: str, needle: str) -> list[tuple[int, int]]:
    """Where `needle` (already casefolded) occurs in `text`, ignoring case, as ranges of `text`
    itself (casefolding may change a text's length: "ß" folds to "ss")."""
    if not needle:
        return []
    folded: list[str] = []
    origin: list[int] = []  # the index in `text` of each character of `folded`
    for index, char in enumerate(text):
        for piece in char.casefold():
            folded.append(piece)
            origin.append(index)
    haystack = "".join(folded)
    found: list[tuple[int, int]] = []
    at = haystack.find(needle)
    while at >= 0:
        end = at + len(needle)
        found.append((origin[at], origin[end - 1] + 1))
        at = haystack.find(needle, end)
    return found


def snippet_parts(text: str, needle: str) -> list[str] | None:
    """The words around the first hit of `needle` (casefolded) in `text`, split at every hit
    they show: even items are the text between, odd items the matched text. None: no hit."""
    hits = find_all(text, needle)
    if not hits:
        return None
    first_start, first_end = hits[0]
    start = _word_start(text, max(0, first_start - SNIPPET_BEFORE), first_start)
    end = _word_end(text, min(len(text), first_end + SNIPPET_AFTER), first_end)
    parts = [ELLIPSIS if start > 0 else ""]
    cursor = start
    for hit_start, hit_end in hits:
        if hit_start < cursor or hit_end > end:
            continue
        parts[-1] += text[cursor:hit_start]
        parts.extend((text[hit_start:hit_end], ""))
        cursor = hit_end
    parts[-1] += text[cursor:end] + (ELLIPSIS if end < len(text) else "")
    return parts


def _word_start(text: str, at: int, limit: int) -> int:
    """`at`, moved forward to the start of a word (not past `limit`, the hit)."""
    if at == 0 or text[at - 1].isspace():
        return at
    space = text.find(" ", at, limit)
    return space + 1 if space >= 0 else at


def _word_end(text: str, at: int, limit: int) -> int:
    """`at`, moved back to the end of a word (not before `limit`, the hit's end)."""
    if at >= len(text) or text[at].isspace():
        return at
    space = text.rfind(" ", limit, at)
    return space if space >= 0 else at
