"""Text files as the file tools, proposals and approvals share them: read safely, edited by
pure functions, compared as unified diffs."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator
from typing import Literal

from modules.results import ToolError
from modules.workspace.safe_fs import SafeRoot

EDIT_LIMIT_BYTES = 10_000_000
SNIFF_BYTES = 8192
NO_NEWLINE = "\\ No newline at end of file\n"
CONTEXT = 3  # lines around a change, as diff -u
DIFF_PAIRS = 1_000_000  # lines of one side times the other's, that a diff compares at most
_HUNK = re.compile(
    r"@@ -(?P<old>\d+)(?P<old_len>,\d+)? \+(?P<new>\d+)(?P<new_len>,\d+)? @@(?P<rest>.*)",
    re.S,
)
Operation = Literal["append", "replace", "clear"]


def read_text(fs: SafeRoot, rel: str, limit: int, *, strict: bool = False) -> str:
    """The whole text of an existing, not too large, not binary regular file of `fs`.

    With `strict`, text that is not valid UTF-8 is refused rather than patched over, so an
    edit never rewrites bytes it could not read.
    """
    try:
        with fs.open_regular(rel) as (handle, info):
            size = info.st_size
            if size > limit:
                raise ToolError(
                    f"{rel} is {size:,} bytes, over the {limit:,} byte limit for this tool."
                )
            data = handle.read(limit + 1)
    except (FileNotFoundError, NotADirectoryError):
        raise ToolError(f"No such file: {rel}. Use list_files to see what exists.") from None
    if len(data) > limit:
        raise ToolError(f"{rel} grew past the {limit:,} byte limit for this tool while read.")
    if b"\x00" in data[:SNIFF_BYTES]:
        raise ToolError(f"{rel} looks like a binary file ({size:,} bytes); it is not text.")
    try:
        return data.decode("utf-8", errors="strict" if strict else "replace")
    except UnicodeDecodeError as exc:
        raise ToolError(
            f"{rel} is not valid UTF-8 (byte {exc.start}); modify_file only edits UTF-8 "
            "text. Use run_python to edit files in other encodings."
        ) from None


def line_count(text: str) -> int:
    """Lines as an editor counts them (a last line without a newline counts too)."""
    return text.count("\n") + (1 if text and not text.endswith("\n") else 0)


def split_lines(text: str) -> list[str]:
    """Lines split on newline only, as editors and grep number them."""
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


def split_keep_ends(text: str) -> list[str]:
    """Lines split on newline only, each keeping its newline."""
    lines = text.split("\n")
    last = lines.pop()
    return [line + "\n" for line in lines] + ([last] if last else [])


def modified_text(
    text: str,
    shown: str,
    operation: Operation,
    *,
    content: str | None = None,
    old_text: str | None = None,
    new_text: str | None = None,
) -> tuple[str, str]:
    """What modify_file makes of `text`, and its one-line summary; raises ToolError."""
    if operation == "append":
        if content is None:
            raise ToolError("append needs 'content': the text to add at the end of the file.")
        return text + content, f"Appended {len(content)} characters to {shown}."
    if operation == "clear":
        return "", f"Cleared {shown}."
    if not old_text:
        raise ToolError("replace needs 'old_text': the exact text to change (not empty).")
    if new_text is None:
        raise ToolError("replace needs 'new_text' (use \"\" to delete old_text).")
    count = text.count(old_text)
    if count == 0:
        raise ToolError(
            f"old_text was not found in {shown}. It must match exactly, including spaces, "
            "indentation and line breaks; read_file the part you want to change and copy it."
        )
    if count > 1:
        raise ToolError(
            f"old_text occurs {count} times in {shown}; it must occur exactly once. "
            "Include more surrounding lines so it is unique."
        )
    line = text[: text.index(old_text)].count("\n") + 1
    return text.replace(old_text, new_text, 1), f"Replaced 1 occurrence in {shown} at line {line}."


def unified_diff(old: str | None, new: str | None, path: str) -> str:
    """A unified diff with `a/PATH` `b/PATH` headers; None stands for no file (/dev/null).

    Lines both texts begin or end with are set aside first (beyond the context shown). What is
    left is compared line by line only while its two sides make at most DIFF_PAIRS pairs of
    lines: difflib takes time of the order of their product, and worse (every other line of
    20,000 changed took a minute). A larger change is one hunk, its old lines then its new
    ones, which its header says."""
    before = f"a/{path}" if old is not None else "/dev/null"
    after = f"b/{path}" if new is not None else "/dev/null"
    a, b = split_keep_ends(old or ""), split_keep_ends(new or "")
    head = _common_run(a, b, 0, min(len(a), len(b)))
    tail = _common_run(a, b, -1, min(len(a), len(b)) - head)
    skip, cut = max(head - CONTEXT, 0), max(tail - CONTEXT, 0)
    a, b = a[skip : len(a) - cut], b[skip : len(b) - cut]
    lead, trail = head - skip, tail - cut  # the shared lines kept as context
    if (len(a) - lead - trail) * (len(b) - lead - trail) <= DIFF_PAIRS:
        lines: Iterator[str] = difflib.unified_diff(a, b, before, after, n=CONTEXT)
    else:
        lines = _one_hunk(a, b, before, after, lead, trail)
    return "".join(_terminated(_shifted(lines, skip)))


def _common_run(a: list[str], b: list[str], start: int, most: int) -> int:
    """How many lines `a` and `b` share from their start (`start` 0) or end (-1), at most
    `most`."""
    step = 1 if start == 0 else -1
    count = 0
    while count < most and a[start + step * count] == b[start + step * count]:
        count += 1
    return count


def _one_hunk(
    a: list[str], b: list[str], before: str, after: str, lead: int, trail: int
) -> Iterator[str]:
    """`a` replaced by `b` as one hunk: the `lead` and `trail` lines they share as context."""
    yield f"--- {before}\n"
    yield f"+++ {after}\n"
    yield (
        f"@@ -{_range(0, len(a))} +{_range(0, len(b))} @@ too long to compare line by line: "
        "all the old lines, then all the new ones\n"
    )
    yield from (" " + line for line in a[:lead])
    yield from ("-" + line for line in a[lead : len(a) - trail])
    yield from ("+" + line for line in b[lead : len(b) - trail])
    yield from (" " + line for line in a[len(a) - trail :])


def _range(start: int, length: int) -> str:
    """A hunk header's range, as difflib writes it."""
    if length == 1:
        return str(start + 1)
    return f"{start + 1 if length else start},{length}"


def _shifted(lines: Iterator[str], offset: int) -> Iterator[str]:
    """The diff's lines, each hunk header's line numbers moved on by `offset`."""
    for line in lines:
        match = _HUNK.match(line) if offset and line.startswith("@@") else None
        if match is None:
            yield line
            continue
        old, new = (int(match[n]) + offset for n in ("old", "new"))
        old_len, new_len = match["old_len"] or "", match["new_len"] or ""
        yield f"@@ -{old}{old_len} +{new}{new_len} @@{match['rest']}"


def _terminated(lines: Iterator[str]) -> Iterator[str]:
    for line in lines:
        yield line if line.endswith("\n") else line + "\n" + NO_NEWLINE
