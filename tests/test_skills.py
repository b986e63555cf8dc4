"""Skills (SKILL.md folders): loading and validation, overrides, and the system prompt's catalog."""

from __future__ import annotations

from pathlib import Path

import pytest

from modules.skill_folders import MAX_FILE_BYTES, MAX_SKILLS, SkillFolder
from modules.skills import SkillCatalog
from tests.kit.skills import GOOD_BODY, add_skill, skill_md
from utils.errors import NotFound
from utils.workspace_config import SKILLS

# --- loading and validation -------------------------------------------------------------

BROKEN = [
    ("no-front", "# just a body\n", "does not start with YAML front matter"),
    ("bad-yaml", "---\nname: [bad\n---\nbody\n", "not valid YAML"),
    ("big-front", "---\nname: big-front\nx: " + "y" * 9000 + "\n---\nbody\n", "over 8,192"),
    (
        "bomb",
        "---\na: &a [[x, x], [x, x]]\n"
        + "".join(
            f"{c}: &{c} [{', '.join(['*' + p] * 9)}]\n"
            for p, c in zip("abcdef", "bcdefg", strict=True)
        )
        + "name: bomb\n---\nbody\n",
        "over 100,000 values",
    ),
    ("a-list", "---\n- name\n---\nbody\n", "not a mapping"),
    ("no-name", "---\ndescription: d\n---\nbody\n", "name is missing"),
    ("Upper", skill_md("Upper"), "lowercase"),
    ("double--hyphen", skill_md("double--hyphen"), "two in a row"),
    ("-lead", skill_md("-lead"), "either end"),
    ("trail-", skill_md("trail-"), "either end"),
    ("x" * 65, skill_md("x" * 65), "1-64"),
    ("other-folder", skill_md("not-the-folder"), "differs from its folder's name"),
    ("no-description", "---\nname: no-description\n---\nbody\n", "description is missing"),
    ("long-description", skill_md("long-description", "d" * 1025), "over 1024"),
    ("bad-license", skill_md("bad-license", extra="license: 3\n"), "license must be a string"),
    ("long-compat", skill_md("long-compat", extra=f"compatibility: {'c' * 501}\n"), "over 500"),
    (
        "number-meta",
        skill_md("number-meta", extra="metadata:\n  version: 1.0\n"),
        "metadata must map strings to strings",
    ),
    ("list-meta", skill_md("list-meta", extra="metadata: [a]\n"), "metadata must map"),
    ("bad-tools", skill_md("bad-tools", extra="allowed-tools: 3\n"), "allowed-tools must be"),
    (
        "bad-flag",
        skill_md("bad-flag", extra="disable-model-invocation: maybe\n"),
        "disable-model-invocation must be true or false",
    ),
    ("latin1", skill_md("latin1").encode() + b"caf\xe9\n", "not UTF-8"),
    ("huge", skill_md("huge", body="x" * (MAX_FILE_BYTES + 1)), "byte limit"),
]


@pytest.mark.parametrize(("folder", "text", "reason"), BROKEN, ids=[b[0][:20] for b in BROKEN])
def test_a_broken_skill_is_listed_with_its_reason_and_the_others_load(
    tmp_path: Path, folder: str, text: str | bytes, reason: str
) -> None:
    add_skill(tmp_path, "greet", skill_md())
    add_skill(tmp_path, folder, text)
    catalog = SkillCatalog([tmp_path])
    assert list(catalog.skills) == ["greet"]
    [broken] = catalog.broken
    assert broken.name == folder and reason in broken.reason
    assert {"name": folder, "broken": broken.reason} in catalog.summaries()
    with pytest.raises(NotFound, match="broken"):
        catalog.require(folder)


def test_folders_without_skill_md_symlinked_folders_and_links_out_are_broken(
    tmp_path: Path,
) -> None:
    root, outside = tmp_path / "skills", tmp_path / "outside"
    add_skill(root, "greet", skill_md())
    (root / "empty").mkdir()
    add_skill(outside, "linked", skill_md("linked"))
    (root / "linked").symlink_to(outside / "linked")
    (root / "escape").mkdir()
    (root / "escape" / "SKILL.md").symlink_to(outside / "linked" / "SKILL.md")
    (root / "notes.txt").write_text("not a skill")
    (root / ".hidden").mkdir()
    reasons = {b.name: b.reason for b in SkillCatalog([root]).broken}
    assert reasons.keys() == {"empty", "linked", "escape"}
    assert "no SKILL.md" in reasons["empty"]
    assert "symbolic link" in reasons["linked"] and "symbolic link" in reasons["escape"]


def test_optional_fields_crlf_and_the_body(tmp_path: Path) -> None:
    extra = (
        'license: MIT\ncompatibility: needs git\nmetadata:\n  version: "1.0"\n'
        "allowed-tools: Bash(git:*) Read\ndisable-model-invocation: true\n"
    )
    text = skill_md(description="Line one\n  and  two\u202e.", extra=extra)
    add_skill(tmp_path, "greet", "\ufeff" + text.replace("\n", "\r\n"))
    skill = SkillCatalog([tmp_path]).require("greet")
    assert skill.description == "Line one and two ."
    assert (skill.license, skill.compatibility) == ("MIT", "needs git")
    assert skill.metadata == {"version": "1.0"}
    assert skill.allowed_tools == ("Bash(git:*)", "Read") and skill.user_only
    assert skill.body == GOOD_BODY.strip() and skill.cut_lines == 0
    add_skill(tmp_path, "listed", skill_md("listed", extra="allowed-tools: [a, b]\n"))
    assert SkillCatalog([tmp_path]).require("listed").allowed_tools == ("a", "b")


def test_later_folders_override_earlier_ones_and_changes_are_seen(tmp_path: Path) -> None:
    shipped, data, workspace = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    add_skill(shipped, "greet", skill_md(description="Shipped."))
    add_skill(shipped, "other", skill_md("other", description="Other."))
    add_skill(data, "greet", skill_md(description="From data."))
    catalog = SkillCatalog([shipped, data, workspace])
    assert catalog.require("greet").description == "From data."
    add_skill(workspace, "greet", "broken")  # a later broken one hides the earlier
    add_skill(workspace, "fresh", skill_md("fresh", description="New."))
    assert sorted(catalog.skills) == ["fresh", "other"]
    assert [b.name for b in catalog.broken] == ["greet"]


# --- the catalog in the system prompt ---------------------------------------------------


def test_catalog_order_user_only_hidden_and_budget(tmp_path: Path) -> None:
    for name in ("zeta", "alpha", "mid"):
        add_skill(tmp_path, name, skill_md(name, description=f"About {name}."))
    add_skill(tmp_path, "secret", skill_md("secret", extra="disable-model-invocation: true\n"))
    catalog = SkillCatalog([tmp_path])
    assert catalog.catalog() == "- alpha: About alpha.\n- mid: About mid.\n- zeta: About zeta."
    assert [s["name"] for s in catalog.summaries()] == ["alpha", "mid", "secret", "zeta"]
    assert next(s for s in catalog.summaries() if s["name"] == "secret")["user_only"]
    cut = catalog.catalog(budget_tokens=10)  # room for the first line only
    assert cut.splitlines()[0] == "- alpha: About alpha."
    assert cut.splitlines()[1].endswith("(use_skill shows one): mid, zeta")
    assert "About mid" not in cut and "secret" not in cut


def test_catalog_of_many_long_skills_stays_within_its_budget(tmp_path: Path) -> None:
    for i in range(200):  # in two folders: at most MAX_SKILLS of one are read
        folder = tmp_path / ("a" if i < MAX_SKILLS else "b")
        add_skill(folder, f"skill-{i:03}", skill_md(f"skill-{i:03}", description="d" * 1000))
    text = SkillCatalog([tmp_path / "a", tmp_path / "b"]).catalog()
    assert len(text) < 1_500 * 3.5 + 1_700
    assert text.count("\n- skill-") == 4 and "and " in text.splitlines()[-1]


# --- the workspace's skills --------------------------------------------------------------------


def workspace_catalog(ws: Path, *user: Path, trusted: bool = False) -> SkillCatalog:
    """The user's folders `user`, then the workspace's .agents/skills, read as the server does."""
    own = SkillFolder(Path(SKILLS), ws, trusted)
    return SkillCatalog([*(SkillFolder(folder) for folder in user), own])


def test_workspace_skills_are_read_through_the_workspace_root(tmp_path: Path) -> None:
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    skills = ws / ".agents" / "skills"
    add_skill(skills, "greet", skill_md())
    add_skill(outside, "away", skill_md("away", body="OUTSIDE-BODY\n"))
    add_skill(ws / "elsewhere", "inner", skill_md("inner", body="INNER-BODY\n"))
    (skills / "escape").mkdir()
    (skills / "escape" / "SKILL.md").symlink_to(outside / "away" / "SKILL.md")
    (skills / "inner").mkdir()
    (skills / "inner" / "SKILL.md").symlink_to("../../../elsewhere/inner/SKILL.md")
    (skills / "linked").symlink_to(outside / "away")
    catalog = workspace_catalog(ws)
    assert sorted(catalog.skills) == ["greet", "inner"]
    assert "INNER-BODY" in catalog.require("inner").body
    reasons = {b.name: b.reason for b in catalog.broken}
    assert "SKILL.md is a symbolic link out of the workspace" in reasons["escape"]
    assert "the skill's folder is a symbolic link" in reasons["linked"]


@pytest.mark.parametrize("linked", [".agents/skills", ".agents"])
def test_a_skills_folder_on_the_way_that_links_out_is_refused(tmp_path: Path, linked: str) -> None:
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    add_skill(outside / "skills", "away", skill_md("away"))
    (ws / Path(linked).parent).mkdir(parents=True, exist_ok=True)
    (ws / linked).symlink_to(outside if linked == ".agents" else outside / "skills")
    catalog = workspace_catalog(ws)
    assert catalog.skills == {}
    [broken] = catalog.broken
    assert broken.folder == str(ws / ".agents" / "skills")
    assert "leads out of the workspace (a symbolic link on the way)" in broken.reason


def test_a_workspace_skill_takes_no_name_of_the_users_unless_trusted(tmp_path: Path) -> None:
    ws, mine = tmp_path / "ws", tmp_path / "mine"
    add_skill(mine, "greet", skill_md(body="MINE\n"))
    add_skill(ws / ".agents" / "skills", "greet", skill_md(body="PLANTED\n"))
    add_skill(ws / ".agents" / "skills", "other", skill_md("other"))
    catalog = workspace_catalog(ws, mine)
    assert "MINE" in catalog.require("greet").body and "other" in catalog.skills
    [refused] = catalog.broken
    assert refused.folder == str(ws / ".agents" / "skills" / "greet")
    assert "the workspace's may not replace it" in refused.reason
    assert "PLANTED" in workspace_catalog(ws, mine, trusted=True).require("greet").body


def test_more_skill_folders_than_read_are_said_to_be_left_out(tmp_path: Path) -> None:
    for n in range(MAX_SKILLS + 3):
        add_skill(tmp_path, f"s{n:03}", skill_md(f"s{n:03}"))
    catalog = SkillCatalog([tmp_path])
    first_left = f"s{MAX_SKILLS:03}"
    assert len(catalog.skills) == MAX_SKILLS and first_left not in catalog.skills
    [broken] = catalog.broken
    assert (
        f"over {MAX_SKILLS} skill folders: the last 3 by name, from {first_left}" in broken.reason
    )


def test_a_change_reads_again_only_the_skill_that_changed(tmp_path: Path) -> None:
    for name in ("alpha", "beta"):
        add_skill(tmp_path, name, skill_md(name))
    catalog = SkillCatalog([tmp_path])
    before = catalog.skills
    (tmp_path / "beta" / "SKILL.md").write_text(skill_md("beta", description="Changed."))
    after = catalog.skills
    assert after["alpha"] is before["alpha"]  # the same object: its file was not read again
    assert after["beta"].description == "Changed."
