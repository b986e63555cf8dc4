"""Agents from files, the three modes, and delegation to sub-agents, against the strict fake
model in both its DeepSeek and Kimi flavours."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from core.agent_loader import load_agents
from core.services import build_services
from tests.fake_llm import Call, FakeLLM, Reply, long_answer
from tests.kit.settings import make_settings
from tests.kit.terminal import TerminalRecorder, ask

PLANNER = """\
name: planner
description: Plans, then works step by step.
mode: plan_execute
max_iterations: 3
max_replans: {replans}
"""


@pytest.fixture(params=["deepseek", "kimi"])
def fake(request: pytest.FixtureRequest) -> Iterator[FakeLLM]:
    with FakeLLM(request.param) as server:
        yield server


def terminal_for(
    fake: FakeLLM,
    tmp_path: Path,
    agent: str,
    *,
    files: dict[str, str] | None = None,
    mode: str = "fast",
    **settings: Any,
) -> TerminalRecorder:
    """A recording terminal on `agent`, with agent files written to the user's folder first."""
    folder = tmp_path / "data" / "agents"
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in (files or {}).items():
        (folder / name).write_text(text)
    services = build_services(make_settings(fake, tmp_path, mode=mode, **settings))
    return TerminalRecorder(services, agent=agent)


# --- definitions ----------------------------------------------------------------------------


def test_bad_definitions_are_reported_with_file_field_and_line_and_the_rest_load(tmp_path):
    (tmp_path / "ok.yaml").write_text("name: fine\ndescription: A good one.\n")
    (tmp_path / "extra.yaml").write_text("name: extra\ndescription: d\ncolour: blue\n")
    (tmp_path / "mode.yaml").write_text("name: moded\ndescription: d\n\nmode: sometimes\n")
    (tmp_path / "badname.json").write_text('{\n  "name": "Bad Name",\n  "description": "d"\n}')
    (tmp_path / "broken.yaml").write_text("name: [unclosed\n")
    (tmp_path / "orphan.yaml").write_text("name: boss\ndescription: d\nagents: [nobody]\n")
    catalog = load_agents([tmp_path])
    assert sorted(catalog.agents) == ["fine"]
    problems = {Path(p.path).name if "/" in p.path else p.path: p.message for p in catalog.problems}
    assert "colour (line 3)" in problems["extra.yaml"] and "extra" in problems["extra.yaml"]
    assert "mode (line 4)" in problems["mode.yaml"]
    assert "name (line 2)" in problems["badname.json"]
    assert "cannot be read" in problems["broken.yaml"]
    assert "unknown agents: ['nobody']" in problems["boss"]


def test_a_template_reaching_for_python_internals_is_refused_at_load(tmp_path):
    escape = "{{ cycler.__init__.__globals__.os.environ }}"
    (tmp_path / "evil.yaml").write_text(f"name: evil\ndescription: d\nsystem_prompt: '{escape}'\n")
    (tmp_path / "typo.yaml").write_text("name: typo\ndescription: d\nsystem_prompt: '{{ nope }}'\n")
    (tmp_path / "fine.yaml").write_text(
        "name: fine\ndescription: d\nsystem_prompt: 'You work in {{ workspace_root }}.'\n"
    )
    catalog = load_agents([tmp_path])
    assert sorted(catalog.agents) == ["fine"]
    problems = {Path(p.path).name: p.message for p in catalog.problems}
    assert "unsafe" in problems["evil.yaml"] and "does not render" in problems["evil.yaml"]
    assert "'nope' is undefined" in problems["typo.yaml"]


def test_later_folders_override_by_name_and_prompt_files_load(tmp_path):
    shipped, user = tmp_path / "shipped", tmp_path / "user"
    shipped.mkdir()
    user.mkdir()
    (shipped / "helper.yaml").write_text("name: helper\ndescription: shipped one\n")
    (user / "helper.yaml").write_text(
        "name: helper\ndescription: mine\nsystem_prompt: helper.md.j2\n"
    )
    (user / "helper.md.j2").write_text("You help in {{ workspace_root }}.")
    spec = load_agents([shipped, user]).get("helper")
    assert spec.description == "mine" and spec.system_prompt == "You help in {{ workspace_root }}."


def test_the_shipped_agents_all_load() -> None:
    from core.agent_specs import SHIPPED_AGENTS

    catalog = load_agents([SHIPPED_AGENTS])
    assert catalog.problems == []
    assert {"general", "research", "coder", "data", "supervisor"} <= set(catalog.agents)
    assert catalog.get("supervisor").agents == ["research", "coder", "data"]
    assert catalog.get(None).name == "general"


# --- modes ----------------------------------------------------------------------------------


def test_plain_sends_no_tools_and_streams_one_answer(fake, tmp_path):
    terminal = terminal_for(
        fake,
        tmp_path,
        "chat",
        files={
            "chat.yaml": "name: chat\ndescription: Talks.\nmode: plain\n"
            "system_prompt: You only talk, in {{ workspace_root }}.\n"
        },
    )
    fake.script(Reply(content="Just words.", chunk_size=3))
    assert ask(terminal, "hello") == "complete"
    [request] = fake.chat_requests
    assert "tools" not in request.body
    assert request.messages[0]["content"].startswith("You only talk, in ")
    assert "".join(t["text"] for t in terminal.named("token")) == "Just words."
    assert {t["agent"] for t in terminal.named("token")} == {"chat"}


def test_general_still_offers_every_tool(fake, tmp_path):
    terminal = terminal_for(fake, tmp_path, "general")
    fake.script(Reply(content="ok"))
    ask(terminal, "hi")
    names = {t["function"]["name"] for t in fake.chat_requests[0].body["tools"]}
    assert {"run_command", "create_file", "sql_query"} <= names
    assert not any(name.startswith("delegate_to_") for name in names)


def plan_script(*steps: Reply) -> list[Reply]:
    return [Reply(tool_calls=[Call("make_plan", {"steps": ["Read", "Write", "Check"]})]), *steps]


def test_a_failed_step_is_replanned_once_and_the_task_completes(fake, tmp_path):
    terminal = terminal_for(
        fake,
        tmp_path,
        "planner",
        files={"planner.yaml": PLANNER.format(replans=1)},
        mode="thinking",
    )
    fake.script(
        Reply(
            tool_calls=[Call("make_plan", {"steps": ["Read", "Write", "Check"]})],
            reasoning="A plan first.",
        ),
        Reply(tool_calls=[Call("list_files", {})]),
        Reply(tool_calls=[Call("finish_step", {"ok": True, "summary": "read it"})]),
        Reply(tool_calls=[Call("finish_step", {"ok": False, "summary": "disk is full"})]),
        Reply(tool_calls=[Call("make_plan", {"steps": ["Write smaller", "Check"]})]),
        Reply(content="Wrote a smaller one."),
        Reply(content="Smaller file written."),  # asked for finish_step, it answers in words
        Reply(tool_calls=[Call("finish_step", {"ok": True, "summary": "checked"})]),
        Reply(content="Everything is done.", chunk_size=4),
    )
    assert ask(terminal, "do the thing") == "complete"
    phases = [(p["phase"], p.get("step"), p.get("status")) for p in terminal.named("plan")]
    assert phases == [
        ("created", None, None),
        ("step_started", 1, None),
        ("step_finished", 1, "done"),
        ("step_started", 2, None),
        ("step_finished", 2, "failed"),
        ("replanned", None, None),
        ("step_started", 3, None),
        ("step_finished", 3, "done"),
        ("step_started", 4, None),
        ("step_finished", 4, "done"),
        ("finished", None, None),
    ]
    final = terminal.named("plan")[-1]["plan"]
    assert final["revision"] == 1
    assert [(s["title"], s["status"]) for s in final["steps"]] == [
        ("Read", "done"),
        ("Write", "failed"),
        ("Write smaller", "done"),
        ("Check", "done"),
    ]
    assert final["steps"][2]["summary"] == "Smaller file written."
    assert terminal.named("done")[-1]["reason"] == "complete"
    assert "".join(t["text"] for t in terminal.named("token")).endswith("Everything is done.")
    assert "tools" not in fake.chat_requests[-1].body  # the final answer is a plain one
    assert terminal.conversation is not None
    records = terminal.conversation.path()
    assert [r["meta"].get("plan_step") for r in records if r["meta"].get("plan_step")] == [
        1,
        2,
        3,
        4,
    ]
    assert records[-2]["meta"]["plan"]["steps"][-1]["status"] == "done"


def test_more_failures_than_max_replans_end_the_task_as_an_error(fake, tmp_path):
    terminal = terminal_for(
        fake, tmp_path, "planner", files={"planner.yaml": PLANNER.format(replans=0)}
    )
    fake.script(
        Reply(tool_calls=[Call("make_plan", {"steps": ["Try"]})]),
        Reply(tool_calls=[Call("finish_step", {"ok": False, "summary": "impossible"})]),
    )
    assert ask(terminal, "try it") == "error"
    error = terminal.named("error")[-1]
    assert error["code"] == "plan_failed" and "impossible" in error["message"]
    assert terminal.named("plan")[-1]["phase"] == "finished"


def test_a_step_that_spends_its_budget_fails(fake, tmp_path):
    terminal = terminal_for(
        fake, tmp_path, "planner", files={"planner.yaml": PLANNER.format(replans=0)}
    )
    fake.script(
        Reply(tool_calls=[Call("make_plan", {"steps": ["Loop"]})]),
        *[Reply(tool_calls=[Call("list_files", {})])] * 3,
    )
    assert ask(terminal, "loop") == "error"
    finished = [p for p in terminal.named("plan") if p["phase"] == "step_finished"]
    assert finished[0]["status"] == "failed" and "3 model calls" in finished[0]["summary"]


# --- delegation -----------------------------------------------------------------------------


def test_the_supervisor_delegates_and_events_nest_under_the_call(fake, tmp_path):
    terminal = terminal_for(fake, tmp_path, "supervisor", mode="thinking")
    fake.script(
        Reply(
            reasoning="The coder should do it.",
            tool_calls=[Call("delegate_to_coder", {"task": "Create hello.txt saying hi"})],
        ),
        Reply(
            content="Creating it.",
            reasoning="Simple.",
            tool_calls=[Call("create_file", {"path": "hello.txt", "content": "hi\n"})],
        ),
        Reply(content="Done: hello.txt holds hi."),
        Reply(content="The coder made hello.txt."),
    )
    assert ask(terminal, "make a hello file") == "complete"
    assert (tmp_path / "ws" / "hello.txt").read_text() == "hi\n"
    tools = {t["function"]["name"] for t in fake.chat_requests[0].body["tools"]}
    assert {"delegate_to_research", "delegate_to_coder", "delegate_to_data"} <= tools
    assert "run_command" not in tools
    child_tools = {t["function"]["name"] for t in fake.chat_requests[1].body["tools"]}
    assert "create_file" in child_tools and "delegate_to_coder" not in child_tools
    assert fake.chat_requests[1].messages[1]["content"] == "Create hello.txt saying hi"
    delegation = terminal.wait_for("tool", phase="start", name="delegate_to_coder")
    nested = [e.payload for e in terminal.events if e.payload.get("parent_call_id")]
    assert nested and all(p["parent_call_id"] == delegation["call_id"] for p in nested)
    assert all(p["depth"] == 1 and p["agent"] == "coder" for p in nested)
    seqs = [e.payload["seq"] for e in terminal.events]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))
    result = terminal.wait_for("tool", phase="result", name="delegate_to_coder")
    assert result["ok"] and result["output"] == "Done: hello.txt holds hi."
    assert result["seq"] > max(p["seq"] for p in nested)
    usage = terminal.named("done")[-1]["usage"]
    assert usage["prompt_tokens"] > 0  # the child's calls count too
    assert terminal.conversation is not None
    stored = [r for r in terminal.conversation.path() if r["role"] in ("assistant", "tool")]
    assert len(stored) == 3  # the parent's call, its result and its final answer only


def test_a_childs_disallowed_tool_is_refused(fake, tmp_path):
    terminal = terminal_for(fake, tmp_path, "supervisor")
    fake.script(
        Reply(tool_calls=[Call("delegate_to_research", {"task": "look"})]),
        Reply(tool_calls=[Call("run_command", {"command": "echo hacked > out.txt"})]),
        Reply(content="I may not run commands."),
        Reply(content="Research could not run it."),
    )
    assert ask(terminal, "go") == "complete"
    refused = [
        e.payload
        for e in terminal.events
        if e.payload.get("name") == "run_command" and e.payload.get("phase") == "result"
    ]
    assert (
        refused[0]["ok"] is False and "not available to the research agent" in refused[0]["output"]
    )
    assert not (tmp_path / "ws" / "out.txt").exists()


def test_a_child_out_of_budget_is_a_tool_error_not_a_crash(fake, tmp_path):
    terminal = terminal_for(
        fake,
        tmp_path,
        "boss",
        files={
            "boss.yaml": "name: boss\ndescription: Delegates.\nagents: [looper]\n",
            "looper.yaml": "name: looper\ndescription: Loops.\nmax_iterations: 2\n",
        },
    )
    fake.script(
        Reply(tool_calls=[Call("delegate_to_looper", {"task": "loop"})]),
        *[Reply(content="still going", tool_calls=[Call("list_files", {})])] * 2,
        Reply(content="The looper gave up."),
    )
    assert ask(terminal, "go") == "complete"
    result = terminal.wait_for("tool", phase="result", name="delegate_to_looper")
    assert result["ok"] is False and "all 2 of its model calls" in result["output"]


def test_cancel_inside_a_child_stops_both_within_a_second(fake, tmp_path):
    terminal = terminal_for(fake, tmp_path, "supervisor")
    fake.script(
        Reply(tool_calls=[Call("delegate_to_coder", {"task": "write slowly"})]),
        Reply(content=long_answer("slow", 500), chunk_size=2, delay=0.02),
    )
    thread = threading.Thread(
        target=ask,
        args=(
            terminal,
            "go",
        ),
        daemon=True,
    )
    thread.start()
    terminal.wait_for("token", agent="coder")
    started = time.monotonic()
    assert terminal.cancel()
    thread.join(5)
    assert not thread.is_alive() and time.monotonic() - started < 1.0
    assert terminal.named("done")[-1]["reason"] == "cancelled"
    assert terminal.conversation is not None
    [answer] = [r for r in terminal.conversation.path() if r["role"] == "tool"]
    assert answer["name"] == "delegate_to_coder" and answer["content"].startswith("Cancelled")


def test_approvals_of_a_childs_calls_reach_the_user(fake, tmp_path):
    terminal = terminal_for(fake, tmp_path, "supervisor", approval="ask")
    fake.script(
        Reply(tool_calls=[Call("delegate_to_coder", {"task": "run it"})]),
        Reply(tool_calls=[Call("run_command", {"command": "echo asked"})]),
        Reply(content="It ran."),
        Reply(content="Done."),
    )
    thread = threading.Thread(
        target=ask,
        args=(
            terminal,
            "go",
        ),
        daemon=True,
    )
    thread.start()
    asked = terminal.wait_for("tool", phase="approval", name="run_command")
    assert asked["agent"] == "coder" and asked["depth"] == 1
    assert terminal.approve(asked["call_id"], True)
    thread.join(10)
    output = terminal.wait_for("tool", phase="result", name="run_command")["output"]
    assert "asked" in output
