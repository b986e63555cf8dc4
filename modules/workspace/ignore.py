"""What the workspace listings (tree, list_files, search_code, the live tree) leave out.

Two sources: built-in names (folders tools regenerate, git's own folder, editor swap and
temp files) and the workspace's `.gitignore` files, read with git's rules. Paths are
workspace-relative POSIX strings; the root is "". Undo skips only the built-in folders
(`SKIPPED_DIRS`): it must put back gitignored build outputs a command deleted.
"""

from __future__ import annotations

import functools
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

SKIPPED_DIRS = frozenset(
    {
        ".git",
        "node_modules",
        ".venv",
        "venv",
        "__pycache__",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".tox",
        ".nox",
    }
)
GITIGNORE = ".gitignore"
_VIM_WRITE_TEST = "4913"


def is_skipped_name(name: str) -> bool:
    """True for built-in names no listing shows, whatever their kind: see SKIPPED_DIRS."""
    return (
        name in SKIPPED_DIRS
        or name == _VIM_WRITE_TEST
        or name.endswith(("~", ".swp", ".swo", ".swx"))
        or name.startswith(".#")
        or (name.startswith(".") and name.endswith(".tmp"))  # atomic writes in progress
    )


@dataclass(frozen=True)
class _Pattern:
    """One .gitignore line, its glob translated to a regular expression."""

    regex: re.Pattern[str]
    negated: bool
    dir_only: bool
    anchored: bool  # matched against the path from the .gitignore's folder, else the name

    def matches(self, rel: str, name: str, is_dir: bool) -> bool:
        if self.dir_only and not is_dir:
            return False
        return self.regex.fullmatch(rel if self.anchored else name) is not None


def _parse_line(line: str) -> _Pattern | None:
    """The pattern of one .gitignore line, or None for blanks and comments."""
    line = _trim_trailing_spaces(line.removesuffix("\r"))
    if not line or line.startswith("#"):
        return None
    negated = line.startswith("!")
    line = line.removeprefix("!")
    dir_only = line.endswith("/")
    line = line.removesuffix("/")
    anchored = "/" in line
    line = line.removeprefix("/")
    if not line:
        return None
    regex = re.compile(_translate(line), re.DOTALL)
    return _Pattern(regex, negated, dir_only, anchored)


def _trim_trailing_spaces(line: str) -> str:
    end = len(line)
    while end and line[end - 1] == " " and not (end >= 2 and line[end - 2] == "\\"):
        end -= 1
    return line[:end]


def _translate(glob: str) -> str:
    """A regular expression for a gitignore glob; `*`, `?` and `[...]` never match '/'."""
    out: list[str] = []
    i, n = 0, len(glob)
    while i < n:
        char = glob[i]
        if char == "*":
            end = i
            while end < n and glob[end] == "*":
                end += 1
            whole_part = (i == 0 or glob[i - 1] == "/") and (end == n or glob[end] == "/")
            if end - i >= 2 and whole_part:
                out.append(".*" if end == n else "(?:.*/)?")  # `/**` at the end, or `**/`
                end += end < n
            else:
                out.append("[^/]*")
            i = end
        elif char == "?":
            out.append("[^/]")
            i += 1
        elif char == "[":
            regex, i = _char_class(glob, i)
            out.append(regex)
        elif char == "\\" and i + 1 < n:
            out.append(re.escape(glob[i + 1]))
            i += 2
        else:
            out.append(re.escape(char))
            i += 1
    return "".join(out)


def _char_class(glob: str, start: int) -> tuple[str, int]:
    """The regex of the `[...]` at `start` and the index after it; a lone '[' is literal."""
    i, n = start + 1, len(glob)
    negated = i < n and glob[i] in "!^"
    i += negated
    body_start = i
    if i < n and glob[i] == "]":
        i += 1
    while i < n and glob[i] != "]":
        i += 2 if glob[i] == "\\" else 1
    if i >= n:
        return re.escape("["), start + 1
    body, items, k = glob[body_start:i], [], 0
    while k < len(body):
        if body[k] == "\\" and k + 1 < len(body):
            items.append(re.escape(body[k + 1]))
            k += 2
            continue
        is_range = body[k] == "-" and items and k + 1 < len(body)
        items.append("-" if is_range else re.escape(body[k]))
        k += 1
    return "[" + ("^/" if negated else "") + "".join(items) + "]", i + 1


@functools.lru_cache(maxsize=512)
def _load(path: str, mtime_ns: int, size: int) -> tuple[_Pattern, ...]:
    """The patterns of one .gitignore; the stat in the key makes an edit take effect."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError:
        return ()
    text = data.decode("utf-8", "surrogateescape").removeprefix("\ufeff")
    return tuple(p for line in text.split("\n") if (p := _parse_line(line)) is not None)


class FolderRules:
    """The rules in force inside one visible folder: built-in names and .gitignore patterns."""

    def __init__(self, rel_dir: str, rules: tuple[tuple[int, _Pattern], ...]) -> None:
        self.rel_dir = rel_dir
        self.rules = rules  # (where the .gitignore's folder ends in a path, pattern), in order

    def hides(self, name: str, is_dir: bool) -> bool:
        """True if the entry `name` of this folder is left out of listings."""
        if is_skipped_name(name):
            return True
        if not self.rules or (name == GITIGNORE and not is_dir):
            return False
        rel = f"{self.rel_dir}/{name}" if self.rel_dir else name
        for cut, pattern in reversed(self.rules):  # the last matching pattern decides
            if pattern.matches(rel[cut:], name, is_dir):
                return not pattern.negated
        return False


class WorkspaceIgnore:
    """What listings leave out of the workspace at `root`; cheap to build, safe to keep."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)

    def folder(self, rel_dir: str) -> FolderRules:
        """The rules for the entries of `rel_dir`, assuming the folder itself is shown."""
        rules = self._rules_in("", ())
        for part in _parts(rel_dir):
            rules = self._enter(rules, part)
        return rules

    def hides(self, rel: str, is_dir: bool) -> bool:
        """True if `rel` is left out of listings, itself or through a folder on its way."""
        *folders, name = _parts(rel) or [""]
        rules = self._rules_in("", ())
        for folder in folders:
            if rules.hides(folder, True):
                return True
            rules = self._enter(rules, folder)
        return bool(name) and rules.hides(name, is_dir)

    def _enter(self, parent: FolderRules, name: str) -> FolderRules:
        rel_dir = f"{parent.rel_dir}/{name}" if parent.rel_dir else name
        return self._rules_in(rel_dir, parent.rules)

    def _rules_in(self, rel_dir: str, inherited: tuple[tuple[int, _Pattern], ...]) -> FolderRules:
        """`inherited` plus the patterns of the folder's own .gitignore, if it has one."""
        path = os.path.join(self.root, rel_dir, GITIGNORE)
        try:
            info = os.lstat(path)
        except OSError:
            return FolderRules(rel_dir, inherited)
        if not stat.S_ISREG(info.st_mode):  # git does not follow a symlinked .gitignore
            return FolderRules(rel_dir, inherited)
        cut = len(rel_dir) + 1 if rel_dir else 0
        own = tuple((cut, p) for p in _load(path, info.st_mtime_ns, info.st_size))
        return FolderRules(rel_dir, inherited + own)


def _parts(rel: str) -> list[str]:
    return [part for part in rel.split("/") if part and part != "."]
