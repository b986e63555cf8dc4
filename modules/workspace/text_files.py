"""Text files as the file tools, proposals and approvals share them: read safely, edited by
pure functions, compared as unified diffs."""

from __future__ import annotations

import difflib
from collections.abc import Iterator
from typing import Literal

from modules.results import ToolError
from modules.workspace.safe_fs import SafeRoot

EDIT_LIMIT_BYTES = 10_000_000
SNIFF_BYTES = 8192
NO_NEWLINE = "\\ No newline at end of file\n"
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
    """A unified diff with `a/PATH` `b/PATH` headers; None stands for no file (/dev/null)."""
    before = f"a/{path}" if old is not None else "/dev/null"
    after = f"b/{path}" if new is not None else "/dev/null"
    lines = difflib.unified_diff(
        split_keep_ends(old or ""), split_keep_ends(new or ""), before, after
    )
    return "".join(_terminated(lines))


def _terminated(lines: Iterator[str]) -> Iterator[str]:
    for line in lines:
        yield line if line.endswith("\n") else line + "\n" + NO_NEWLINE
