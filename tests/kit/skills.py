"""The skills part of the test kit: a SKILL.md's text and a skill folder holding it."""

from __future__ import annotations

from pathlib import Path

GOOD_BODY = "# Greet\n\nSay hello in three languages.\n"


def skill_md(
    name: str = "greet",
    description: str = "Greets people warmly.",
    extra: str = "",
    body: str = GOOD_BODY,
) -> str:
    return f"---\nname: {name}\ndescription: {description}\n{extra}---\n\n{body}"


def add_skill(root: Path, folder: str, text: str | bytes) -> Path:
    path = root / folder
    path.mkdir(parents=True, exist_ok=True)
    data = text.encode() if isinstance(text, str) else text
    (path / "SKILL.md").write_bytes(data)
    return path
