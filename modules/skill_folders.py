"""Where skills are found, and how their files are reached.

The user's folders (the shipped `skills/`, `DATA_DIR/skills/`) are listed by their paths, and
each skill's files are reached from its own folder, never through a link out of it. The
workspace's `.agents/skills/` is reached only from the workspace root
(modules/workspace/safe_fs.py), so a symbolic link anywhere on the way, `.agents` and the skill
folders included, never leads out of the workspace. At most MAX_SKILLS skills of a folder are
read.
"""

from __future__ import annotations

import contextlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from modules.results import ToolError
from modules.workspace.safe_fs import PathOutsideWorkspace, SafeRoot

MAX_SKILLS = 100
MAX_FILE_BYTES = 256 * 1024  # a bigger SKILL.md is broken; read_skill_file refuses bigger files


class FileTooLarge(ValueError):
    """A skill's file over MAX_FILE_BYTES: `size` its size, None when it grew past while read."""

    def __init__(self, size: int | None) -> None:
        super().__init__(f"over the {MAX_FILE_BYTES:,} byte limit")
        self.size = size


@dataclass(frozen=True)
class SkillPlace:
    """One skill's folder (`folder`, as shown), and whether it is the user's (`within` None) or
    inside the workspace `within`; `link`: the folder itself is a symbolic link."""

    folder: Path
    within: Path | None = None
    trusted: bool = True  # it may replace a skill of its name from an earlier folder
    link: bool = False

    @property
    def boundary(self) -> str:
        """What no link may lead out of on the way to its files."""
        return "the skill's folder" if self.within is None else "the workspace"

    def reach(self, rel: str) -> tuple[SafeRoot, str]:
        """The root a walk to the skill's file `rel` starts from, and the path from there."""
        if self.within is None:
            return SafeRoot(self.folder), rel
        return SafeRoot(self.within), f"{self.folder.relative_to(self.within).as_posix()}/{rel}"

    def read(self, rel: str, shown: str) -> bytes:
        """The skill's file `rel` whole (`shown` names it in errors): FileTooLarge over
        MAX_FILE_BYTES, and what SafeRoot.open_regular raises for a file it cannot open."""
        root, path = self.reach(rel)
        with root.open_regular(path, shown) as (handle, info):
            if info.st_size > MAX_FILE_BYTES:
                raise FileTooLarge(info.st_size)
            data = handle.read(MAX_FILE_BYTES + 1)
        if len(data) > MAX_FILE_BYTES:
            raise FileTooLarge(None)
        return data

    def mark(self, name: str) -> tuple[object, ...]:
        """What changes when its file `name` is added, removed or edited."""
        root, rel = self.reach(name)
        try:
            info = root.lstat(rel, follow=True)
        except (OSError, ToolError):
            info = None
        times = None if info is None else (info.st_mtime_ns, info.st_size, info.st_ino)
        return (str(self.folder), self.link, times)


@dataclass(frozen=True)
class SkillFolder:
    """A folder of skills: one of the user's (`within` None), or the workspace's, `path` then
    relative to the workspace `within`; a skill of an untrusted one may not replace another."""

    path: Path
    within: Path | None = None
    trusted: bool = True

    @property
    def shown(self) -> Path:
        return self.path if self.within is None else self.within / self.path

    def places(self) -> tuple[list[SkillPlace], str | None]:
        """Its skills' folders (hidden ones and plain files left out), by name, at most
        MAX_SKILLS, and what is wrong with the folder itself (None: nothing)."""
        try:
            entries = self._entries()
        except PathOutsideWorkspace:
            return [], (
                f"{self.path} leads out of the workspace (a symbolic link on the way): its "
                "skills are not loaded"
            )
        except (OSError, ToolError):
            return [], None  # no such folder: no skills
        found = sorted(
            (name, stat.S_ISLNK(mode))
            for name, mode in entries
            if not name.startswith(".") and (stat.S_ISDIR(mode) or stat.S_ISLNK(mode))
        )
        places = [
            SkillPlace(self.shown / name, self.within, self.trusted, link)
            for name, link in found[:MAX_SKILLS]
        ]
        if len(found) <= MAX_SKILLS:
            return places, None
        return places, (
            f"over {MAX_SKILLS} skill folders: the last {len(found) - MAX_SKILLS} by name, "
            f"from {found[MAX_SKILLS][0]}, are not loaded"
        )

    def _entries(self) -> list[tuple[str, int]]:
        if self.within is not None:
            listed = SafeRoot(self.within).list_dir(str(self.path))
            return [(name, info.st_mode) for name, info in listed]
        found = []
        with os.scandir(self.path) as entries:
            for entry in entries:
                with contextlib.suppress(OSError):  # gone since it was listed
                    found.append((entry.name, entry.stat(follow_symlinks=False).st_mode))
        return found
