"""The workspace paths Workspace Agent reads as its own configuration, and why each matters.

Code outside the sandbox reads them: agent definitions and their prompt files
(`.agents/agents/`), skills (`.agents/skills/`) and the workspace's MCP servers (`.mcp.json`,
started unsandboxed under AGENT_MCP_TRUST_WORKSPACE). (The data folder and the user's MCP file
may not lie in the workspace: the start is refused, utils/settings.py.) A change to one asks the
user even in `auto` mode (core/tool_step.py); a command's is held until approved
(modules/undo/config_hold.py).

`.gitignore` is not listed: it decides only what the tree, `list_files`, the MCP resources and
the archive show, never what runs or what the agent is told, and the undo journal's scans (and
so the hold of a command's changes) do not follow it. Paths are matched as the tools name them
(core resolves them first: `..`, `.`, trailing slashes and symbolic links on the way are gone),
case-sensitively as Linux does; a first component that differs only in case counts when it is
the same folder (a case-insensitive file system).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from utils.workspace_config import AGENT_DEFINITIONS, AGENTS_FOLDER, MCP_FILE, SKILLS


@dataclass(frozen=True)
class ConfigPath:
    """A workspace path (and all under it) that Workspace Agent reads as `what`."""

    path: str
    what: str
    effect: str


_AGENT = "an agent definition or its prompt file"
_AGENT_EFFECT = "it can change what the agent is told and may do"
_SKILL = "a skill"
_SKILL_EFFECT = "it can change the instructions the agent follows and the scripts it runs"
_MCP_EFFECT = (
    "with AGENT_MCP_TRUST_WORKSPACE on, the servers it names are started outside the sandbox"
)

# The most specific first: a path takes the reason of the first entry it lies in. An entry is
# all a new one needs: the file tools then ask before changing it, and a command's changes to it
# are held (their scan reaches an entry inside a folder the undo journal skips, such as `.git`).
WORKSPACE_CONFIG: tuple[ConfigPath, ...] = (
    ConfigPath(AGENT_DEFINITIONS, _AGENT, _AGENT_EFFECT),
    ConfigPath(SKILLS, _SKILL, _SKILL_EFFECT),
    ConfigPath(AGENTS_FOLDER, "the folder of its agent definitions and skills", _AGENT_EFFECT),
    ConfigPath(MCP_FILE, "the workspace's MCP servers", _MCP_EFFECT),
)


class ProtectedPaths:
    """Which workspace paths are Workspace Agent's own configuration, and why."""

    def __init__(self, root: Path, entries: Sequence[ConfigPath] = WORKSPACE_CONFIG) -> None:
        self.root = Path(os.path.realpath(root))
        self.entries = tuple(entries)

    def tops(self) -> list[str]:
        """The entries no other entry holds: what a command's changes are looked for in."""
        paths = [entry.path for entry in self.entries]
        return [p for p in paths if not any(_within(p, other) for other in paths if other != p)]

    def reason(self, rel: str) -> str | None:
        """Why changing the workspace path `rel` changes the configuration, as the end of a
        sentence (`X, which Workspace Agent reads as …: …`); None when it does not."""
        rel = self._as_spelled(rel)
        for entry in self.entries:
            if _within(rel, entry.path):
                return f"{rel}, which Workspace Agent reads as {entry.what}: {entry.effect}"
        for entry in self.entries:
            if _within(entry.path, rel):
                return (
                    f"{rel}, which holds {entry.path}, read by Workspace Agent as {entry.what}: "
                    f"{entry.effect}"
                )
        return None

    def reasons(self, rels: Iterable[str]) -> list[str]:
        """The reason of each path of `rels` that changes the configuration."""
        return [why for rel in rels if (why := self.reason(rel)) is not None]

    def _as_spelled(self, rel: str) -> str:
        """`rel` with its first component spelled as an entry's when the two name the same
        folder or file (they differ in case only on a case-insensitive file system)."""
        first, sep, rest = rel.partition("/")
        for entry in self.entries:
            top = entry.path.partition("/")[0]
            if first != top and first.casefold() == top.casefold() and self._same(first, top):
                return top + sep + rest
        return rel

    def _same(self, one: str, other: str) -> bool:
        try:
            return os.path.samestat(os.lstat(self.root / one), os.lstat(self.root / other))
        except OSError:
            return False


def _within(rel: str, top: str) -> bool:
    """Whether `rel` is `top` or lies under it ("" holds everything)."""
    return top == "" or rel == top or rel.startswith(f"{top}/")
