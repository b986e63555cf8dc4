"""Agent definitions read from their folders: what a bad, huge, planted or linked file does (it is
listed as a problem and the others load), and what a workspace definition may not loosen unless
the user trusts the workspace's agents."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from core.agent_files import MAX_FILE_BYTES, MAX_FOLDER_BYTES
from core.agent_loader import MAX_DEFINITIONS, MAX_VALUES, load_agents
from core.agent_specs import SHIPPED_AGENTS, AgentCatalog
from tests.kit.settings import make_settings
from utils.settings import Settings

SHIPPED = ["coder", "data", "general", "research", "supervisor"]


def settings(workspace: Path, **overrides: Any) -> Settings:
    return make_settings(workspace=workspace, data_dir=workspace.parent / "data", **overrides)


def planted(workspace: Path, files: dict[str, str | bytes]) -> Path:
    """Write `files` into the workspace's .agents/agents; the folder."""
    folder = workspace / ".agents" / "agents"
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        data = text.encode() if isinstance(text, str) else text
        (folder / name).write_bytes(data)
    return folder


def load(workspace: Path, limits: Settings | None = None, *user: Path) -> AgentCatalog:
    """The shipped agents, the user's folders `user`, then the workspace's, under `limits`."""
    return load_agents([SHIPPED_AGENTS, *user], workspace, limits)


def problems(catalog: AgentCatalog) -> dict[str, str]:
    return {Path(p.path).name: p.message for p in catalog.problems}


# --- bad files: listed, never raised ----------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [".inf", "-.inf", ".nan", "1e400", "1" + "0" * 400, "-5", "0", "'" + "9" * 400 + " tokens'"],
)
def test_a_budget_out_of_range_is_a_problem_of_its_file(tmp_path: Path, value: str) -> None:
    ws = tmp_path / "ws"
    planted(ws, {"zz.yaml": f"name: zz\ndescription: d\nbudget: {value}\n", "ok.yaml": OK})
    catalog = load(ws)
    assert sorted(catalog.agents) == sorted([*SHIPPED, "ok"])
    assert "budget (line 3)" in problems(catalog)["zz.yaml"]


def test_a_json_budget_of_a_huge_integer_is_a_problem_too(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    planted(ws, {"zz.json": '{"name": "zz", "description": "d", "budget": 1' + "0" * 400 + "}"})
    assert "over the largest budget" in problems(load(ws))["zz.json"]


OK = "name: ok\ndescription: A fine one.\n"
LAUGHS = "".join(
    f"{c}: &{c} [{', '.join(['*' + p] * 9) if p else 'x, x, x, x, x, x, x, x, x'}]\n"
    for p, c in zip(["", *"abcdefgh"], "abcdefghi", strict=True)
)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (LAUGHS + "name: zz\ndescription: *i\n", f"over {MAX_VALUES:,} values"),
        ("name: zz\ndescription: d\ntools: [" + "x, " * 9_000 + "]\n", f"over {MAX_VALUES:,}"),
        ("a: &a [1, *a]\nname: zz\ndescription: d\n", "refers to the value it is part of"),
        ("name: zz\ndescription: d\ntools: " + "[" * 600 + "]" * 600 + "\n", "nests over 64"),
        ("name: zz\ndescription: d\ntools: " + "[" * 5000 + "]" * 5000 + "\n", "cannot be read"),
        ("name: zz\ndescription: " + "9" * 5000 + "\n", "cannot be read"),
        (b"name: zz\ndescription: \xff\n", "not UTF-8"),
        ("x" * (MAX_FILE_BYTES + 1), f"over the {MAX_FILE_BYTES:,} byte limit"),
    ],
)
def test_yaml_bombs_deep_nesting_and_oversized_files_are_refused_quickly(
    tmp_path: Path, text: str | bytes, said: str
) -> None:
    ws = tmp_path / "ws"
    planted(ws, {"zz.yaml": text, "ok.yaml": OK})
    started = time.monotonic()
    catalog = load(ws)
    assert time.monotonic() - started < 10  # a load of ms; room for a loaded machine
    assert said in problems(catalog)["zz.yaml"] and "ok" in catalog.agents


def test_a_json_file_nested_past_the_interpreter_is_a_problem(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    deep = '{"name": "zz", "description": "d", "tools": ' + "[" * 60_000 + "]" * 60_000 + "}"
    planted(ws, {"zz.json": deep})
    assert "cannot be read" in problems(load(ws))["zz.json"]


@pytest.mark.parametrize(
    "template",
    [
        "{{ 'a' * 10**9 }}",
        "{{ 'x'.ljust(10**9) }}",
        "{{ '%0999999999d' % 1 }}",
        "{% for a in range(99999) %}{% for b in range(99999) %}{% endfor %}{% endfor %}",
        "{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}"
        "{% endfor %}",
        "{% if now != 'now' %}{{ 'a' * 10**9 }}{% endif %}",
        "{{ now|center(10**9) }}",
        "{{ (" * 3000 + "1" + ") }}" * 3000,
        "{{ now }}" * 3000,
        "{% include 'system.md.j2' %}",
        "{{ cycler.__init__.__globals__ }}",
    ],
)
def test_a_workspace_template_that_could_explode_is_refused_before_it_is_compiled(
    tmp_path: Path, template: str
) -> None:
    ws = tmp_path / "ws"
    planted(
        ws, {"zz.json": json.dumps({"name": "zz", "description": "d", "system_prompt": template})}
    )
    started = time.monotonic()
    catalog = load(ws)
    assert time.monotonic() - started < 10
    assert "the template does not render" in problems(catalog)["zz.json"]
    assert "zz" not in catalog.agents


def test_a_plain_workspace_template_loads_and_a_users_may_use_all_of_jinja(
    tmp_path: Path,
) -> None:
    ws, mine = tmp_path / "ws", tmp_path / "mine"
    mine.mkdir()
    loop = "{% for i in range(2) %}{{ i }}{% endfor %}"
    (mine / "looper.yaml").write_text(f"name: looper\ndescription: d\nsystem_prompt: '{loop}'\n")
    plain = "In {{ workspace_root }}{% if now > '2020' %}, late{% else %}, early{% endif %}"
    plain += "{{ ' ' ~ now }}."
    planted(
        ws, {"fine.json": json.dumps({"name": "fine", "description": "d", "system_prompt": plain})}
    )
    catalog = load(ws, None, mine)
    assert {"fine", "looper"} <= set(catalog.agents) and catalog.problems == []


def test_a_pipe_in_a_folder_never_blocks_the_load(tmp_path: Path) -> None:
    ws, mine = tmp_path / "ws", tmp_path / "mine"
    folder = planted(
        ws, {"ok.yaml": OK, "prompt.yaml": "name: p\ndescription: d\nsystem_prompt: p.md\n"}
    )
    mine.mkdir()
    for where in (folder / "pipe.yaml", mine / "pipe.yaml", folder / "p.md"):
        os.mkfifo(where)
    result: list[AgentCatalog] = []
    loader = threading.Thread(target=lambda: result.append(load(ws, None, mine)), daemon=True)
    loader.start()
    loader.join(30)
    assert result, "the load blocked on a pipe"
    said = {p.path: p.message for p in result[0].problems}
    assert "cannot be read" in said[str(folder / "pipe.yaml")]
    assert "cannot be read" in said[str(mine / "pipe.yaml")]
    assert "p.md is a named pipe" in said[str(folder / "prompt.yaml")]
    assert "ok" in result[0].agents


def test_more_files_than_read_are_said_to_be_left_out(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    count = MAX_DEFINITIONS + 5
    planted(ws, {f"a{n:03}.yaml": f"name: a{n:03}\ndescription: d\n" for n in range(count)})
    catalog = load(ws)
    last, first_left = f"a{MAX_DEFINITIONS - 1:03}", f"a{MAX_DEFINITIONS:03}"
    assert last in catalog.agents and first_left not in catalog.agents
    assert (
        f"over {MAX_DEFINITIONS} definition files: the last 5 by name, from {first_left}"
        in (problems(catalog)["agents"])
    )


def test_the_files_of_a_folder_are_read_up_to_a_total(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    filler = "# " + "x" * (MAX_FILE_BYTES - 100) + "\n"
    count = MAX_FOLDER_BYTES // MAX_FILE_BYTES + 2
    planted(ws, {f"a{n}.yaml": f"name: a{n}\ndescription: d\n{filler}" for n in range(count)})
    catalog = load(ws)
    read = MAX_FOLDER_BYTES // len(filler)
    assert {f"a{n}" for n in range(read)} <= set(catalog.agents)
    assert f"a{count - 1}" not in catalog.agents
    assert (
        f"the folder's files would pass {MAX_FOLDER_BYTES:,} bytes"
        in (problems(catalog)[f"a{count - 1}.yaml"])
    )


def test_an_oversized_prompt_file_beside_is_refused(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    planted(
        ws,
        {
            "big.yaml": "name: big\ndescription: d\nsystem_prompt: big.md\n",
            "big.md": "x" * (MAX_FILE_BYTES + 1),
        },
    )
    assert "big.md is" in problems(load(ws))["big.yaml"]


# --- links out of the workspace --------------------------------------------------------------


def test_links_out_of_the_workspace_are_refused_at_every_level(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "out.yaml").write_text("name: out\ndescription: From outside.\n")
    (outside / "secret.md").write_text("The outside prompt.")
    ws = tmp_path / "ws"
    folder = planted(
        ws, {"beside.yaml": "name: beside\ndescription: d\nsystem_prompt: secret.md\n"}
    )
    (folder / "link.yaml").symlink_to(outside / "out.yaml")
    (folder / "secret.md").symlink_to(outside / "secret.md")
    (ws / "inside.yaml").write_text("name: inside\ndescription: A link within is fine.\n")
    (folder / "inside.yaml").symlink_to("../../inside.yaml")
    catalog = load(ws)
    said = problems(catalog)
    assert "link.yaml leads out of the workspace" in said["link.yaml"]
    assert "secret.md leads out of the workspace" in said["beside.yaml"]
    assert "inside" in catalog.agents and not {"out", "beside"} & set(catalog.agents)


@pytest.mark.parametrize("linked", [".agents/agents", ".agents"])
def test_a_folder_on_the_way_that_links_out_is_refused(tmp_path: Path, linked: str) -> None:
    outside, ws = tmp_path / "outside", tmp_path / "ws"
    (outside / "agents").mkdir(parents=True)
    (outside / "agents" / "x.yaml").write_text("name: x\ndescription: From outside.\n")
    (ws / Path(linked).parent).mkdir(parents=True, exist_ok=True)
    (ws / linked).symlink_to(outside if linked == ".agents" else outside / "agents")
    catalog = load(ws)
    assert sorted(catalog.agents) == SHIPPED
    [problem] = catalog.problems
    assert problem.path == str(ws / ".agents" / "agents")
    assert "leads out of the workspace (a symbolic link on the way)" in problem.message


# --- what a workspace definition may not loosen -----------------------------------------------


def test_a_planted_general_with_a_bigger_budget_is_refused_and_the_shipped_one_stays(
    tmp_path: Path,
) -> None:
    ws = tmp_path / "ws"
    planted(ws, {"general.yaml": "name: general\ndescription: Planted.\nbudget: 1m tokens\n"})
    limits = settings(ws, budget_task="200k tokens")
    catalog = load(ws, limits)
    assert catalog.get("general").description != "Planted."
    message = problems(catalog)["general.yaml"]
    assert "may not loosen the user's limits: budget 1,000,000 tokens, over the 200,000" in message
    assert "AGENT_TRUST_WORKSPACE_AGENTS=true allows it" in message
    trusted = load(ws, None)  # the user trusts the workspace's agents
    assert trusted.get("general").budget is not None and trusted.problems == []


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("name: coder\ndescription: d\ntools: ['*']\n", "tools '*', which the coder agent"),
        ("name: coder\ndescription: d\nmax_iterations: 21\n", "max_iterations 21, over the 20"),
        ("name: coder\ndescription: d\nmode: plan_execute\n", "mode 'plan_execute', where"),
        (
            "name: coder\ndescription: d\nprovider: openai\n",
            "another endpoint, with the user's key",
        ),
        ("name: coder\ndescription: d\nmodel: gpt-9\n", "model 'gpt-9', which neither"),
        ("name: coder\ndescription: d\nbudget: $1\n", "cannot be compared with the 5,000 tokens"),
        ("name: newbie\ndescription: d\nmax_iterations: 30\n", "the default agent (general)"),
        (
            "name: newbie\ndescription: d\nagents: [helper]\n",
            "delegates to helper, which may work in mode 'plan_execute'",
        ),
        (
            "name: newbie\ndescription: d\ntools: [read_file]\nagents: [coder]\n",
            "delegates to coder",
        ),
    ],
)
def test_a_workspace_definition_may_not_loosen_a_limit(
    tmp_path: Path, text: str, said: str
) -> None:
    ws, mine = tmp_path / "ws", tmp_path / "mine"
    mine.mkdir()
    (mine / "helper.yaml").write_text(
        "name: helper\ndescription: d\nmode: plan_execute\nmax_replans: 1\n"
    )
    planted(ws, {"new.yaml": text})
    catalog = load(ws, settings(ws, budget_task="5000 tokens"), mine)
    assert said in problems(catalog)["new.yaml"]
    assert sorted(catalog.agents) == sorted([*SHIPPED, "helper"])
    assert catalog.get("coder").tools[0] == "create_file"  # the shipped one stayed


def test_a_workspace_definition_may_tighten_every_limit(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    planted(
        ws,
        {
            "coder.yaml": "name: coder\ndescription: Narrow.\ntools: [read_file, list_files]\n"
            "max_iterations: 5\nbudget: 1000 tokens\nmode: plain\n",
            "mcp.yaml": "name: mcp\ndescription: d\ntools: ['mcp__files__*', read_file]\n",
            "boss.yaml": "name: boss\ndescription: d\nagents: [coder]\nmax_iterations: 10\n",
            "model.yaml": "name: model\ndescription: d\nprovider: deepseek\nmodel: v4-pro\n",
        },
    )
    limits = settings(ws, budget_task="5000 tokens", model="v4-pro", max_iterations=10)
    catalog = load(ws, limits)
    assert catalog.problems == []
    assert catalog.get("coder").description == "Narrow." and {"mcp", "boss", "model"} <= set(
        catalog.agents
    )


def test_a_new_agent_gets_no_tool_the_default_agent_lacks(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    planted(
        ws,
        {
            "wide.yaml": "name: wide\ndescription: d\n",
            "narrow.yaml": "name: narrow\ndescription: d\ntools: [read_file]\nmax_iterations: 5\n",
        },
    )
    catalog = load(ws, settings(ws, default_agent="research"))
    assert "tools '*', which the default agent (research)" in problems(catalog)["wide.yaml"]
    assert "narrow" in catalog.agents and "wide" not in catalog.agents


def test_dropping_an_agent_drops_those_that_delegate_to_it_and_brings_back_what_it_replaced(
    tmp_path: Path,
) -> None:
    ws, mine = tmp_path / "ws", tmp_path / "mine"
    mine.mkdir()
    (mine / "lead.yaml").write_text("name: lead\ndescription: Mine.\nagents: [coder]\n")
    planted(
        ws,
        {
            "lead.yaml": "name: lead\ndescription: Planted.\nagents: [middle]\n",
            "middle.yaml": "name: middle\ndescription: d\nagents: [wide]\n",
            "wide.yaml": "name: wide\ndescription: d\nmax_iterations: 50\n",
        },
    )
    catalog = load(ws, settings(ws), mine)
    said = problems(catalog)
    assert "max_iterations 50" in said["wide.yaml"]
    assert "delegates to unknown agents: ['wide']" in said["middle.yaml"]
    assert "delegates to unknown agents: ['middle']" in said["lead.yaml"]
    assert catalog.get("lead").description == "Mine."  # the user's own came back
