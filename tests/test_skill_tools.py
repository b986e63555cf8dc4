"""The skill tools, use_skill and read_skill_file: bodies, files, their limits, shipped skills."""

from __future__ import annotations

from pathlib import Path

import pytest

from modules.skill_folders import MAX_FILE_BYTES, SkillFolder
from modules.skills import MAX_BODY_LINES, SHIPPED_SKILLS, SkillCatalog
from modules.tools.catalogue import build_registry
from modules.tools.tool_context import ToolContext
from tests.fake_llm import Call, FakeLLM, Reply
from tests.kit.skills import add_skill, skill_md
from tests.kit.terminal import ask, make_terminal
from tests.kit.tools import call, make_ctx
from utils.workspace_config import SKILLS

# --- the tools --------------------------------------------------------------------------


def _ctx(tmp_path: Path, folders: list[Path]) -> ToolContext:
    ctx = make_ctx(tmp_path)
    ctx.skills = SkillCatalog(folders)
    return ctx


def test_a_long_body_is_cut_with_a_note_and_readable_whole(tmp_path: Path) -> None:
    lines = [f"step {i}" for i in range(MAX_BODY_LINES + 20)]
    add_skill(tmp_path / "skills", "long", skill_md("long", body="\n".join(lines)))
    ctx = _ctx(tmp_path, [tmp_path / "skills"])
    assert ctx.skills is not None
    skill = ctx.skills.require("long")
    assert skill.cut_lines == 20 and skill.body.endswith(f"step {MAX_BODY_LINES - 1}")
    used = call(ctx, "use_skill", name="long").output
    assert "20 more lines of SKILL.md were cut" in used and "step 510" not in used
    assert "step 519" in call(ctx, "read_skill_file", name="long", path="SKILL.md").output


@pytest.fixture
def kit(tmp_path: Path) -> tuple[ToolContext, Path]:
    root = tmp_path / "skills"
    folder = add_skill(root, "kit", skill_md("kit", body="Read references/guide.md first."))
    for sub, name, data in (
        ("references", "guide.md", b"# Guide\nbe kind\n"),
        ("scripts", "run.py", b"print('hi')\n"),
        ("assets", "logo.png", b"\x89PNG\r\n\x1a\n\x00\x00"),
        ("assets", "big.txt", b"x" * (MAX_FILE_BYTES + 1)),
        ("references", "latin.txt", b"caf\xe9"),
    ):
        (folder / sub).mkdir(exist_ok=True)
        (folder / sub / name).write_bytes(data)
    (folder / "references" / "deeper").mkdir()
    (folder / "references" / "deeper" / "x.md").write_text("deep")
    (tmp_path / "secret.txt").write_text("top secret")
    (folder / "references" / "out.md").symlink_to(tmp_path / "secret.txt")
    (folder / "references" / "same.md").symlink_to("guide.md")
    add_skill(root, "quiet", skill_md("quiet", extra="disable-model-invocation: true\n"))
    return _ctx(tmp_path, [root]), folder


def test_the_tools_are_registered_read_only() -> None:
    registry = build_registry()
    for name in ("use_skill", "read_skill_file"):
        tool = registry.get(name)
        assert tool is not None and tool.read_only and "skill" in tool.description
    read_skill_file = registry.get("read_skill_file")
    assert read_skill_file is not None
    schema = read_skill_file.schema()["function"]
    assert "references/" in schema["parameters"]["properties"]["path"]["description"]


def test_use_skill_gives_the_body_and_the_files(kit: tuple[ToolContext, Path]) -> None:
    ctx, _ = kit
    result = call(ctx, "use_skill", name="kit")
    assert result.ok and result.output.startswith("# Skill: kit")
    assert "Read references/guide.md first." in result.output
    assert "references/guide.md" in result.output and "scripts/run.py" in result.output
    assert "assets/logo.png" in result.output and "not readable, one level only" in result.output
    assert "run_python" in result.output  # the shipped folder is outside the workspace
    missing = call(ctx, "use_skill", name="nope")
    assert not missing.ok and "No skill 'nope'" in missing.output and "kit" in missing.output
    quiet = call(ctx, "use_skill", name="quiet")
    assert not quiet.ok and "only be invoked by the user" in quiet.output
    ctx.skills = None
    assert "No skills" in call(ctx, "use_skill", name="kit").output


def test_read_skill_file_reads_inside_the_skill_only(kit: tuple[ToolContext, Path]) -> None:
    ctx, _ = kit
    for path in ("references/guide.md", "./references//guide.md"):
        result = call(ctx, "read_skill_file", name="kit", path=path)
        assert result.ok and result.output == "kit/references/guide.md:\n# Guide\nbe kind\n"
    assert "be kind" in call(ctx, "read_skill_file", name="kit", path="references/same.md").output
    assert "print('hi')" in call(ctx, "read_skill_file", name="kit", path="scripts/run.py").output
    assert ctx.skills is not None
    refused = {
        "../kit/SKILL.md": "outside the skill's folder",
        "references/../../secret.txt": "outside the skill's folder",
        str(ctx.skills.require("kit").folder / "SKILL.md"): "not a path inside",
        "/etc/passwd": "not a path inside",
        "references/out.md": "symbolic link",
        "references/deeper/x.md": "too deep",
        "other/file.md": "too deep",
        "assets/logo.png": "binary",
        "assets/big.txt": "byte limit",
        "references/latin.txt": "not UTF-8",
        "references/none.md": "has no file references/none.md",
        "references": "not a regular file",
        "": "outside the skill's folder",
    }
    for path, reason in refused.items():
        result = call(ctx, "read_skill_file", name="kit", path=path)
        assert not result.ok and reason in result.output, (path, result.output)
        assert "top secret" not in result.output
    # a user-only skill's files stay readable: the user may have invoked it with /skill
    assert call(ctx, "read_skill_file", name="quiet", path="SKILL.md").ok


def test_a_workspace_skill_says_where_its_scripts_run(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    folder = add_skill(ctx.workspace.root / ".agents/skills", "local", skill_md("local"))
    (folder / "scripts").mkdir()
    (folder / "scripts" / "go.py").write_text("print(1)\n")
    ctx.skills = SkillCatalog([ctx.workspace.root / ".agents/skills"])
    output = call(ctx, "use_skill", name="local").output
    assert "run_command" in output and "python3 .agents/skills/local/scripts/NAME.py" in output


def test_a_workspace_skills_files_are_read_within_the_workspace(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    ws = ctx.workspace.root
    folder = add_skill(ws / ".agents/skills", "local", skill_md("local"))
    (folder / "references").mkdir()
    (tmp_path / "secret.txt").write_text("top secret")
    (ws / "notes.md").write_text("shared notes")
    (folder / "references" / "out.md").symlink_to(tmp_path / "secret.txt")
    (folder / "references" / "notes.md").symlink_to("../../../../notes.md")
    ctx.skills = SkillCatalog([SkillFolder(Path(SKILLS), ws, trusted=False)])
    out = call(ctx, "read_skill_file", name="local", path="references/out.md")
    assert not out.ok and "outside the workspace" in out.output and "secret" not in out.output
    assert (
        "shared notes"
        in call(ctx, "read_skill_file", name="local", path="references/notes.md").output
    )
    assert "references/notes.md" in call(ctx, "use_skill", name="local").output


# --- the shipped skills -----------------------------------------------------------------


def test_every_shipped_skill_loads_and_its_files_exist(tmp_path: Path) -> None:
    catalog = SkillCatalog([SHIPPED_SKILLS])
    assert catalog.broken == []
    assert {"changelog-entry", "summarize-csv", "code-review"} <= set(catalog.skills)
    ctx = _ctx(tmp_path, [SHIPPED_SKILLS])
    for skill in catalog.skills.values():
        assert not skill.user_only and skill.cut_lines == 0 and skill.license == "MIT"
        assert skill.body in call(ctx, "use_skill", name=skill.name).output
        for path in ("scripts/profile_csv.py", "references/keep-a-changelog.md"):
            if path in skill.body:
                assert call(ctx, "read_skill_file", name=skill.name, path=path).ok


def test_the_csv_profiler_runs_as_run_python_code(fake_llm: FakeLLM, tmp_path: Path) -> None:
    """As the skill says: read the script, set CSV_PATH, run it with run_python (sandboxed)."""
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "sales.csv").write_text(
        "date,region,units,price,note\n2024-01-03,North,12,3.50,first\n"
        '2024-01-04,South,7,4.25,\n2024-02-11,North,n/a,3.50,"with, comma"\n'
    )
    script = SHIPPED_SKILLS / "summarize-csv" / "scripts" / "profile_csv.py"
    code = script.read_text().replace('CSV_PATH = "data.csv"', 'CSV_PATH = "sales.csv"')
    fake_llm.script(
        Reply(
            tool_calls=[
                Call("read_skill_file", {"name": "summarize-csv", "path": "scripts/profile_csv.py"})
            ]
        ),
        Reply(tool_calls=[Call("run_python", {"code": code})]),
        Reply(content="A small sales table."),
    )
    terminal = make_terminal(fake_llm, tmp_path)
    assert ask(terminal, "summarise sales.csv", skill="summarize-csv") == "complete"
    read, ran = [e for e in terminal.named("tool") if e["phase"] == "result"]
    assert read["ok"] and 'CSV_PATH = "data.csv"' in read["output"]
    assert ran["ok"], ran["output"]
    report = ran["output"]
    assert "3 rows x 5 columns" in report
    assert "## date\n- type: date" in report and "from 2024-01-03 to 2024-02-11" in report
    assert "## units\n- type: text" in report  # one value in three is not a number
    assert "## price\n- type: number" in report and "min 3.5, max 4.25" in report
    assert "## note\n- type: text; blank: 1 of 3" in report
