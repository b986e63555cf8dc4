"""What the workspace listings (tree, list_files, search_code, the live tree) leave out.

Two sources: built-in names (folders tools regenerate, git's own folder, editor swap and
temp files) and the workspace's `.gitignore` files, read with git's rules. Paths are
workspace-relative POSIX strings; the root is "". Undo skips only the built-in folders
(`SKIPPED_DIRS`): it must put back gitignored build outputs a command deleted.

Tasks write the .gitignore files and the server reads them (docs/protocol.md §14): each is read
through the workspace's fd walk (a regular file, never through a link out, never a pipe), and
its patterns match in time bounded by the lengths (_translate, MAX_GITIGNORE_BYTES).
"""

from __future__ import annotations

import functools
import logging
import os
import re
import stat
import time
from dataclasses import dataclass
from pathlib import Path

from modules.results import ToolError
from modules.workspace.safe_fs import SafeRoot

log = logging.getLogger(__name__)

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
MAX_GITIGNORE_BYTES = 32 * 1024  # a larger .gitignore is not read (git skips one over 100 MB)
# Matching an entry takes time in proportion to its path's length times the length of the
# patterns that apply: a deep folder under large hostile patterns could take seconds each. So
# one listing spends at most this long on its .gitignore files (reading and matching them);
# past it, the listing goes on leaving out the built-in names alone.
LISTING_SECONDS = 2.0
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
    """One .gitignore line: its glob as the source of a regular expression, and how it applies."""

    source: str
    negated: bool
    dir_only: bool
    anchored: bool  # matched against the path from the .gitignore's folder, else the name


class _FileRules:
    """The patterns of one .gitignore. Each kind of them (anchored or not, folders only or not)
    is one regular expression whose alternatives come last pattern first, so the alternative
    that matches is the last pattern of that kind that does: a call or two per entry, whatever
    the number of patterns."""

    def __init__(self, patterns: list[_Pattern]) -> None:
        kinds: dict[tuple[bool, bool], list[tuple[int, _Pattern]]] = {}
        for index, pattern in enumerate(patterns):
            kinds.setdefault((pattern.anchored, pattern.dir_only), []).append((index, pattern))
        self._checks: list[tuple[re.Pattern[str], bool, bool, list[tuple[int, bool]]]] = []
        for (anchored, dir_only), found in kinds.items():
            found.reverse()
            regex = re.compile("|".join(f"({p.source})" for _, p in found), re.DOTALL)
            self._checks.append((regex, anchored, dir_only, [(i, p.negated) for i, p in found]))

    def decides(self, rel: str, name: str, is_dir: bool) -> bool | None:
        """Whether the last pattern matching the entry hides it (a negated one shows it); None
        when no pattern matches."""
        last, hidden = -1, None
        for regex, anchored, dir_only, order in self._checks:
            if dir_only and not is_dir:
                continue
            match = regex.fullmatch(rel if anchored else name)
            if match is not None and match.lastindex is not None:
                index, negated = order[match.lastindex - 1]
                if index > last:
                    last, hidden = index, not negated
        return hidden


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
    return _Pattern(_translate(line), negated, dir_only, anchored)


def _trim_trailing_spaces(line: str) -> str:
    end = len(line)
    while end and line[end - 1] == " " and not (end >= 2 and line[end - 2] == "\\"):
        end -= 1
    return line[:end]


# Tokens of a glob besides the regex of one character (which never matches '/' but for "/"):
_STAR = "*"  # any run of characters within one name
_DIRS = "**/"  # any number of whole folders, none included
_REST = "**"  # a final `/**`: everything inside


def _translate(glob: str) -> str:
    """A regular expression for a gitignore glob that takes time in proportion to the path's
    length times the pattern's, never exponential (`*a*a*a*a*b` could take hours).

    Python's engine backtracks, so each `*` between two others, and each `**/` between two
    others, is an atomic group finding its next part at the leftmost place: for parts of a
    fixed length, as the parts between stars are, the leftmost place is right whenever any is.
    """
    tokens = _tokens(glob)
    rest = bool(tokens) and tokens[-1] == _REST
    if rest:
        tokens.pop()
    chunks = _split(tokens, _DIRS)
    regex = _folders(chunks[0])
    for middle in chunks[1:-1]:
        regex += f"(?>(?:.*?/)??{_folders(middle)})"
    if len(chunks) > 1:
        regex += f"(?:.*/)?{_folders(chunks[-1])}"
    return regex + (".*" if rest else "")


def _folders(tokens: list[str]) -> str:
    return "/".join(_name(part) for part in _split(tokens, "/"))


def _name(tokens: list[str]) -> str:
    """The regex of the glob of one name (no '/'): the parts between its stars."""
    parts = ["".join(part) for part in _split(tokens, _STAR)]
    if len(parts) == 1:
        return parts[0]
    middle = "".join(f"(?>[^/]*?{part})" for part in parts[1:-1])
    return f"{parts[0]}{middle}[^/]*{parts[-1]}"


def _split(tokens: list[str], separator: str) -> list[list[str]]:
    parts: list[list[str]] = [[]]
    for token in tokens:
        if token == separator:
            parts.append([])
        else:
            parts[-1].append(token)
    return parts


def _tokens(glob: str) -> list[str]:
    """The glob as _STAR, _DIRS, _REST and the regex of each character it matches."""
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
                out.append(_REST if end == n else _DIRS)  # `/**` at the end, or `**/`
                end += end < n
            else:
                out.append(_STAR)
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
    return out


def _char_class(glob: str, start: int) -> tuple[str, int]:
    """The regex of the `[...]` at `start` and the index after it; a lone '[' is literal. As in
    git, a class never matches '/'."""
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
    if negated:
        return "[^/" + "".join(items) + "]", i + 1
    return "(?!/)[" + "".join(items) + "]", i + 1


@functools.lru_cache(maxsize=64)  # compiled, a hostile 32 KiB file takes a few MB
def _load(root: str, rel: str, mtime_ns: int, size: int, ino: int) -> _FileRules | None:
    """The patterns of the .gitignore `rel` of `root`, read through the workspace's fd walk
    (never a link, a pipe or a file outside); the stat in the key makes an edit take effect.
    A file over MAX_GITIGNORE_BYTES is not read (as git skips one over 100 MB)."""
    try:
        with SafeRoot(Path(root)).open_regular(rel, follow=False) as (handle, _):
            data = handle.read(MAX_GITIGNORE_BYTES + 1)
    except (OSError, ToolError):
        return None
    if len(data) > MAX_GITIGNORE_BYTES:
        log.warning("%s is over %d bytes: it is not read", rel, MAX_GITIGNORE_BYTES)
        return None
    text = data.decode("utf-8", "surrogateescape").removeprefix("\ufeff")
    patterns = [p for line in text.split("\n") if (p := _parse_line(line)) is not None]
    return _FileRules(patterns) if patterns else None


class _Clock:
    """What one listing has left of LISTING_SECONDS for its .gitignore files."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.left = LISTING_SECONDS

    @property
    def out(self) -> bool:
        return self.left <= 0

    def charge(self, started: float) -> None:
        """Count the time since `started`, a perf_counter() reading."""
        if self.out:
            return
        self.left -= time.perf_counter() - started
        if self.out:
            log.warning(
                "the .gitignore files of %s took over %g s in one listing: the rest of it "
                "leaves out only the built-in names",
                self.root,
                LISTING_SECONDS,
            )


class FolderRules:
    """The rules in force inside one visible folder: built-in names and .gitignore patterns."""

    def __init__(
        self, rel_dir: str, rules: tuple[tuple[int, _FileRules], ...], clock: _Clock
    ) -> None:
        self.rel_dir = rel_dir
        self.rules = rules  # (where its folder ends in a path, a .gitignore's), outermost first
        self.clock = clock

    def hides(self, name: str, is_dir: bool) -> bool:
        """True if the entry `name` of this folder is left out of listings."""
        if is_skipped_name(name):
            return True
        if not self.rules or (name == GITIGNORE and not is_dir) or self.clock.out:
            return False
        started = time.perf_counter()
        rel = f"{self.rel_dir}/{name}" if self.rel_dir else name
        try:
            for cut, rules in reversed(self.rules):  # a deeper .gitignore's patterns come later
                hidden = rules.decides(rel[cut:], name, is_dir)
                if hidden is not None:
                    return hidden
            return False
        finally:
            self.clock.charge(started)


class WorkspaceIgnore:
    """What listings leave out of the workspace at `root`; cheap to build, one per listing: it
    has LISTING_SECONDS for the .gitignore files, and `folder` remembers the rules of each
    folder it was asked about (a walk asks about each folder once, and a deep folder's rules
    come from its parent's); `hides` looks at the .gitignore files afresh each time."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)
        self._clock = _Clock(self.root)
        self._folders: dict[str, FolderRules] = {}

    def folder(self, rel_dir: str) -> FolderRules:
        """The rules for the entries of `rel_dir`, assuming the folder itself is shown."""
        rel_dir = "/".join(_parts(rel_dir))
        rules = self._folders.get(rel_dir)
        if rules is None:
            if rel_dir:
                parent, _, name = rel_dir.rpartition("/")
                rules = self._enter(self.folder(parent), name)
            else:
                rules = self._rules_in("", None)
            self._folders[rel_dir] = rules
        return rules

    def hides(self, rel: str, is_dir: bool) -> bool:
        """True if `rel` is left out of listings, itself or through a folder on its way."""
        *folders, name = _parts(rel) or [""]
        rules = self._rules_in("", None)
        for folder in folders:
            if rules.hides(folder, True):
                return True
            rules = self._enter(rules, folder)
        return bool(name) and rules.hides(name, is_dir)

    def _enter(self, parent: FolderRules, name: str) -> FolderRules:
        rel_dir = f"{parent.rel_dir}/{name}" if parent.rel_dir else name
        return self._rules_in(rel_dir, parent)

    def _rules_in(self, rel_dir: str, parent: FolderRules | None) -> FolderRules:
        """The parent's rules plus the patterns of the folder's own .gitignore, if it has one."""
        rules = parent.rules if parent is not None else ()
        path = os.path.join(self.root, rel_dir, GITIGNORE)
        try:
            info = os.lstat(path)
        except OSError:
            info = None
        # git does not follow a symlinked .gitignore
        if info is not None and stat.S_ISREG(info.st_mode) and not self._clock.out:
            started = time.perf_counter()
            rel = f"{rel_dir}/{GITIGNORE}" if rel_dir else GITIGNORE
            own = _load(str(self.root), rel, info.st_mtime_ns, info.st_size, info.st_ino)
            self._clock.charge(started)
            if own is not None:
                rules = (*rules, (len(rel_dir) + 1 if rel_dir else 0, own))
        return FolderRules(rel_dir, rules, self._clock)


def _parts(rel: str) -> list[str]:
    return [part for part in rel.split("/") if part and part != "."]
