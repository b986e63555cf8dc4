"""Skills (SKILL.md folders): loading and validation, the prompt's catalog, the two tools, the
model using one, the user invoking one from the CLI and the page, and the shipped skills."""

from __future__ import annotations

import io
import json
import subprocess
from pathlib import Path

import pytest

from cli.session import run_command
from cli.terminal import CliTerminal
from core.services import build_services
from modules.results import ToolResult
from modules.skills import (
    MAX_BODY_LINES,
    MAX_FILE_BYTES,
    SHIPPED_SKILLS,
    SkillCatalog,
)
from modules.tools.catalogue import build_registry
from modules.tools.tool_context import ToolContext
from tests.fake_llm import Call, FakeLLM, Reply
from tests.helpers import fake_settings, make_ctx, make_terminal
from tests.web_helpers import Web, agent_argv, agent_env

GOOD_BODY = "# Greet\n\nSay hello in three languages.\n"


def skill_md(
    name: str = "greet",
    description: str = "Greets people warmly.",
    extra: str = "",
    body: str = GOOD_BODY,
) -> str:
    return f"---\nname: {name}\ndescription: {description}\n{extra}---\n\n{body}"


def call(ctx: ToolContext, tool: str, **arguments: object) -> ToolResult:
    """Dispatch one tool call as the loop does (the tools take an argument called `name`)."""
    return build_registry().dispatch(tool, json.dumps(arguments), ctx)


def add_skill(root: Path, folder: str, text: str | bytes) -> Path:
    path = root / folder
    path.mkdir(parents=True, exist_ok=True)
    data = text.encode() if isinstance(text, str) else text
    (path / "SKILL.md").write_bytes(data)
    return path


# --- loading and validation -------------------------------------------------------------

BROKEN = [
    ("no-front", "# just a body\n", "does not start with YAML front matter"),
    ("bad-yaml", "---\nname: [bad\n---\nbody\n", "not valid YAML"),
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
    with pytest.raises(KeyError, match="broken"):
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
    for i in range(200):
        add_skill(tmp_path, f"skill-{i:03}", skill_md(f"skill-{i:03}", description="d" * 1000))
    text = SkillCatalog([tmp_path]).catalog()
    assert len(text) < 1_500 * 3.5 + 1_700
    assert text.count("\n- skill-") == 4 and "and " in text.splitlines()[-1]


# --- the tools --------------------------------------------------------------------------


def _ctx(tmp_path: Path, folders: list[Path]) -> ToolContext:
    ctx = make_ctx(tmp_path)
    ctx.skills = SkillCatalog(folders)
    return ctx


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


# --- the model and the user using skills ------------------------------------------------


def _workspace_skill(workspace: Path, name: str = "greet") -> None:
    add_skill(
        workspace / ".agents" / "skills",
        name,
        skill_md(name, description="Greets people warmly.", body="SECRET-BODY-42: wave."),
    )


def test_the_model_sees_the_catalog_and_loads_a_body(fake_llm: FakeLLM, tmp_path: Path) -> None:
    _workspace_skill(tmp_path / "ws")
    fake_llm.script(
        Reply(tool_calls=[Call("use_skill", {"name": "greet"})]), Reply(content="Waved.")
    )
    terminal = make_terminal(fake_llm, tmp_path)
    assert terminal.handle_task("say hi") == "complete"
    system = fake_llm.chat_requests[0].messages[0]["content"]
    assert "# Skills" in system and "- greet: Greets people warmly." in system
    assert "SECRET-BODY-42" not in system
    assert "- summarize-csv:" in system  # the shipped ones too
    tool_message = fake_llm.chat_requests[1].messages[-1]
    assert tool_message["role"] == "tool" and "SECRET-BODY-42: wave." in tool_message["content"]


def test_a_task_with_a_skill_gives_the_body_with_the_message(
    fake_llm: FakeLLM, tmp_path: Path
) -> None:
    _workspace_skill(tmp_path / "ws")
    fake_llm.script(Reply(content="ok"))
    terminal = make_terminal(fake_llm, tmp_path)
    assert terminal.handle_task("to Ann", skill="greet") == "complete"
    user = fake_llm.chat_requests[0].last_user_text
    assert "invoked the skill 'greet'" in user and "SECRET-BODY-42" in user
    assert user.endswith("to Ann")
    with pytest.raises(KeyError, match="no skill 'nope'"):
        terminal.handle_task("x", skill="nope")


def test_cli_skill_command_in_a_subprocess(fake_llm: FakeLLM, tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    _workspace_skill(workspace)
    fake_llm.script(Reply(content="Done."))
    env = agent_env(fake_llm.base_url, fake_llm.api_key)
    argv = agent_argv("cli", workspace, tmp_path / "data", "-p")
    done = subprocess.run(
        [*argv, "/skill greet do it"], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    user = fake_llm.chat_requests[0].last_user_text
    assert "SECRET-BODY-42" in user and user.endswith("do it")
    unknown = subprocess.run(
        [*argv, "/skill nope do it"], env=env, capture_output=True, text=True, timeout=60
    )
    assert unknown.returncode == 2 and "no skill 'nope'" in unknown.stderr
    assert len(fake_llm.chat_requests) == 1


def test_cli_skills_lists_ready_and_broken_skills(fake_llm: FakeLLM, tmp_path: Path) -> None:
    _workspace_skill(tmp_path / "ws")
    add_skill(tmp_path / "ws" / ".agents" / "skills", "wrong", skill_md("other"))
    settings = fake_settings(fake_llm, tmp_path, approval="ask")
    out = io.StringIO()
    terminal = CliTerminal(
        build_services(settings), out=out, err=io.StringIO(), stdin=io.StringIO()
    )
    run_command(terminal, "/skills")
    listed = out.getvalue()
    assert "greet" in listed and "Greets people warmly." in listed
    assert "changelog-entry" in listed and "summarize-csv" in listed
    assert "wrong" in listed and "broken: name 'other' differs" in listed


def test_socket_send_message_with_a_skill(web: Web, fake_llm: FakeLLM, tmp_path: Path) -> None:
    _workspace_skill(tmp_path / "ws")
    fake_llm.script(Reply(content="Done."))
    client = web.connect()
    status = client.call("get_status", {})
    assert {"name": "greet", "description": "Greets people warmly.", "user_only": False} in status[
        "skills"
    ]
    ack = client.call("send_message", {"conversation_id": None, "text": "hi", "skill": "greet"})
    assert ack["ok"], ack
    assert client.wait_done(ack["conversation_id"])[-1].payload["reason"] == "complete"
    user = fake_llm.chat_requests[0].last_user_text
    assert "SECRET-BODY-42" in user and user.endswith("hi")
    bad = client.call("send_message", {"conversation_id": None, "text": "hi", "skill": "nope"})
    assert bad["ok"] is False and bad["error"]["code"] == "not_found"
    assert "nope" in bad["error"]["message"]


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
    assert terminal.handle_task("summarise sales.csv", skill="summarize-csv") == "complete"
    read, ran = [e for e in terminal.named("tool") if e["phase"] == "result"]
    assert read["ok"] and 'CSV_PATH = "data.csv"' in read["output"]
    assert ran["ok"], ran["output"]
    report = ran["output"]
    assert "3 rows x 5 columns" in report
    assert "## date\n- type: date" in report and "from 2024-01-03 to 2024-02-11" in report
    assert "## units\n- type: text" in report  # one value in three is not a number
    assert "## price\n- type: number" in report and "min 3.5, max 4.25" in report
    assert "## note\n- type: text; blank: 1 of 3" in report
