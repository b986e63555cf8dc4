"""Skills in the SKILL.md format (agentskills.io): a folder with `SKILL.md` (YAML front matter
`name`, `description`, ...) and optional `scripts/`, `references/`, `assets/`.

Progressive disclosure: the system prompt lists each skill's name and description; the body
comes with `use_skill` or when the user invokes one (`/skill NAME ...`). Found in the shipped
`skills/`, `DATA_DIR/skills/` and the workspace's `.agents/skills/`, later ones overriding
earlier ones by name; a malformed skill is listed as broken, never loaded.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

SHIPPED_SKILLS = Path(__file__).resolve().parent.parent / "skills"
SKILL_FILE = "SKILL.md"
_NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
_FRONT_MATTER = re.compile(r"\A---\s*\n(.*?)\n---\s*(?:\n|\Z)", re.DOTALL)


@dataclass(frozen=True)
class Skill:
    name: str
    description: str
    folder: Path
    body: str
    user_only: bool  # `disable-model-invocation`: only the user may invoke it


@dataclass(frozen=True)
class BrokenSkill:
    folder: str
    reason: str


class SkillCatalog:
    """The skills of some folders, read once; `reload()` reads them again."""

    def __init__(self, folders: list[Path]) -> None:
        self.folders = folders
        self.skills: dict[str, Skill] = {}
        self.broken: list[BrokenSkill] = []
        self.reload()

    def reload(self) -> None:
        """Read every skill folder again."""
        skills: dict[str, Skill] = {}
        broken: list[BrokenSkill] = []
        for root in self.folders:
            if not root.is_dir():
                continue
            for folder in sorted(p for p in root.iterdir() if p.is_dir()):
                try:
                    skill = _load(folder)
                except ValueError as exc:
                    broken.append(BrokenSkill(str(folder), str(exc)))
                    continue
                skills[skill.name] = skill
        self.skills, self.broken = skills, broken

    def require(self, name: str) -> Skill:
        """The named skill; KeyError names the ones there are."""
        if name not in self.skills:
            known = ", ".join(sorted(self.skills)) or "none"
            raise KeyError(f"no skill {name!r}; the skills are: {known}")
        return self.skills[name]

    def summaries(self) -> list[dict[str, Any]]:
        """Each skill's name and description, then each broken one's folder and reason."""
        ready = [{"name": s.name, "description": s.description, "user_only": s.user_only}
                 for s in sorted(self.skills.values(), key=lambda s: s.name)]
        return ready + [{"name": Path(b.folder).name, "broken": b.reason} for b in self.broken]

    def catalog(self) -> str:
        """One line per skill the model may use, by name, for the system prompt."""
        return "\n".join(f"- {s.name}: {s.description}"
                         for s in sorted(self.skills.values(), key=lambda s: s.name)
                         if not s.user_only)

    def expand(self, record: dict[str, Any]) -> dict[str, Any]:
        """A user message that invoked a skill, as the model gets it: the skill's body first."""
        name = (record.get("meta") or {}).get("skill")
        skill = self.skills.get(name) if name else None
        if record.get("role") != "user" or skill is None:
            return record
        content = (f"[The user invoked the skill {skill.name!r}; follow it.]\n\n{skill.body}"
                   f"\n\n---\n\n{record.get('content') or ''}")
        return {**record, "content": content}


def _load(folder: Path) -> Skill:
    path = folder / SKILL_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{SKILL_FILE} cannot be read: {exc}") from None
    match = _FRONT_MATTER.match(text)
    if match is None:
        raise ValueError(f"{SKILL_FILE} has no YAML front matter between '---' lines")
    try:
        meta = yaml.safe_load(match.group(1))
    except yaml.YAMLError as exc:
        raise ValueError(f"its front matter is not valid YAML: {exc}") from None
    if not isinstance(meta, dict):
        raise ValueError("its front matter is not a mapping")
    name, description = meta.get("name"), meta.get("description")
    if not isinstance(name, str) or not _NAME.match(name) or len(name) > 64:
        raise ValueError("name must be 1-64 lowercase letters, digits and single hyphens")
    if name != folder.name:
        raise ValueError(f"name {name!r} differs from its folder's name {folder.name!r}")
    if not isinstance(description, str) or not description.strip() or len(description) > 1024:
        raise ValueError("description must be 1-1024 characters")
    return Skill(name, description.strip(), folder, text[match.end():].strip(),
                 bool(meta.get("disable-model-invocation")))
