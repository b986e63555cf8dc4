"""The skill tools: `use_skill` gives a skill's instructions, `read_skill_file` its files."""

from __future__ import annotations

import errno

from pydantic import BaseModel, Field

from modules.results import ToolError
from modules.skill_folders import FileTooLarge
from modules.skills import (
    RESOURCE_FOLDERS,
    SKILL_FILE,
    SNIFF_BYTES,
    Skill,
    SkillCatalog,
    skill_files,
    skill_text,
)
from modules.tools.tool_context import ToolContext
from modules.workspace.safe_fs import NotRegular, PathOutsideWorkspace
from utils.errors import NotFound


class UseSkillArgs(BaseModel):
    name: str = Field(
        description="The skill's name exactly as listed under '# Skills' in the system prompt, "
        "for example 'summarize-csv'."
    )


class ReadSkillFileArgs(BaseModel):
    name: str = Field(description="The skill's name, as given to use_skill.")
    path: str = Field(
        description="The file, relative to the skill's folder, as use_skill lists it: a file "
        "in the folder itself (e.g. 'SKILL.md') or one level inside scripts/, references/ or "
        "assets/ (e.g. 'references/format.md', 'scripts/profile_csv.py'). No absolute paths, "
        "no '..'."
    )


def _catalog(ctx: ToolContext) -> SkillCatalog:
    if ctx.skills is None:
        raise ToolError("No skills are available here.")
    return ctx.skills


def _find(ctx: ToolContext, name: str) -> Skill:
    try:
        return _catalog(ctx).require(name)
    except NotFound as exc:
        why = str(exc)
        raise ToolError(f"{why[:1].upper()}{why[1:]}.") from None


def use_skill(ctx: ToolContext, args: UseSkillArgs) -> str:
    """Get a skill's instructions: the body of its SKILL.md, to follow for the current task.

    The system prompt's "# Skills" section lists the skills by name and description. When
    one fits the task, call this once with its name before starting, then follow what it
    says. The answer starts with the skill's files (scripts/, references/, assets/): read
    the ones it mentions with read_skill_file. Scripts are never run by this tool; run them
    with run_python (or run_command when the answer says where they are in the workspace),
    which the user may be asked to approve.
    """
    skill = _find(ctx, args.name)
    if skill.user_only:
        raise ToolError(
            f"The skill {skill.name!r} can only be invoked by the user "
            f"(/skill {skill.name} ...); do not use it on your own."
        )
    return skill_text(skill, _where_scripts_run(ctx, skill))


def _where_scripts_run(ctx: ToolContext, skill: Skill) -> str | None:
    root = ctx.workspace.root
    try:
        rel = skill.folder.resolve().relative_to(root)
    except ValueError:
        return None
    return (
        f"Its folder is `{rel.as_posix()}` in the workspace: run a script with "
        f"run_command, for example `python3 {rel.as_posix()}/scripts/NAME.py ARGS`."
    )


def read_skill_file(ctx: ToolContext, args: ReadSkillFileArgs) -> str:
    """Read a text file of a skill: a reference, script or asset its instructions name.

    The path is relative to the skill's folder, as use_skill lists the files; nothing
    outside that folder can be read (absolute paths, '..' and symbolic links out are
    refused), and neither binary files nor files over 256 KB. To run a script you read,
    pass its text to run_python (set its inputs as its instructions say).
    """
    skill = _find(ctx, args.name)
    rel = _skill_path(args.path)
    data = _read_limited(skill, rel, args.path)
    if b"\x00" in data[:SNIFF_BYTES]:
        raise ToolError(f"{rel} of the skill {skill.name!r} is a binary file; it is not text.")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ToolError(
            f"{rel} of the skill {skill.name!r} is not UTF-8 text (byte {exc.start})."
        ) from None
    return f"{skill.name}/{rel}:\n{text}"


def _skill_path(path: str) -> str:
    if path.startswith("/") or "\x00" in path:
        raise ToolError(
            f"{path[:200]!r} is not a path inside the skill's folder: give it "
            "relative to the folder, e.g. 'references/format.md'."
        )
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if not parts or ".." in parts:
        raise ToolError(
            f"{path[:200]!r} leads outside the skill's folder; give a file "
            "relative to it, e.g. 'references/format.md'."
        )
    if len(parts) > 2 or (len(parts) == 2 and parts[0] not in RESOURCE_FOLDERS):
        raise ToolError(
            f"{path[:200]!r} is too deep: a skill's files are its own ones and "
            "those one level inside scripts/, references/ or assets/."
        )
    return "/".join(parts)


def _read_limited(skill: Skill, rel: str, shown: str) -> bytes:
    try:
        return skill.place.read(rel, shown)
    except FileTooLarge as exc:
        if exc.size is None:
            raise ToolError(f"{rel} grew {exc} while read.") from None
        raise ToolError(f"{rel} is {exc.size:,} bytes, {exc} of read_skill_file.") from None
    except PathOutsideWorkspace:
        raise ToolError(
            f"{shown[:200]!r} leads outside {skill.place.boundary} (a symbolic link "
            "points out of it); it cannot be read."
        ) from None
    except NotRegular:
        raise ToolError(
            f"{rel} of the skill {skill.name!r} is not a regular file; its files "
            f"are: {', '.join([SKILL_FILE, *skill_files(skill)])}."
        ) from None
    except (FileNotFoundError, NotADirectoryError):
        files = ", ".join([SKILL_FILE, *skill_files(skill)])
        raise ToolError(
            f"The skill {skill.name!r} has no file {rel}; its files: {files}."
        ) from None
    except OSError as exc:
        why = "too many symbolic links" if exc.errno == errno.ELOOP else exc.strerror
        raise ToolError(f"{rel} of the skill {skill.name!r} cannot be read: {why}.") from None
