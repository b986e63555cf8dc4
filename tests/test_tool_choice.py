"""Where the loop must get a tool call (a plan, a step's end) it names the tool in
`tool_choice`, unless the provider or AGENT_TOOL_CHOICE turns that off; a server that
ignores the field and answers in words still gets a plan and ended steps."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from core.services import build_services
from tests.fake_llm import Call, FakeLLM, Reply
from tests.kit.settings import make_settings
from tests.kit.terminal import TerminalRecorder, ask

PLANNER = "name: planner\ndescription: Plans, then works.\nmode: plan_execute\nmax_iterations: 3\n"


def forced(name: str) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name}}


def planner(fake: FakeLLM, tmp_path: Path, **settings: Any) -> TerminalRecorder:
    folder = tmp_path / "data" / "agents"  # the user's own: plan_execute is theirs to allow
    folder.mkdir(parents=True)
    (folder / "planner.yaml").write_text(PLANNER)
    return TerminalRecorder(
        build_services(make_settings(fake, tmp_path, **settings)), agent="planner"
    )


def offered(body: dict[str, Any]) -> list[str]:
    return [tool["function"]["name"] for tool in body.get("tools") or []]


@pytest.fixture
def openai_fake() -> Iterator[FakeLLM]:
    with FakeLLM("openai") as server:
        yield server


def test_the_plan_and_a_step_end_are_asked_for_by_name(openai_fake, tmp_path):
    terminal = planner(openai_fake, tmp_path)
    openai_fake.script(
        Reply(tool_calls=[Call("make_plan", {"steps": ["Look around"]})]),
        Reply(content="I looked: two files."),
        Reply(tool_calls=[Call("finish_step", {"ok": True, "summary": "saw two files"})]),
        Reply(content="There are two files."),
    )
    assert ask(terminal, "what is here?") == "complete"
    plan, step, finish, final = (r.body for r in openai_fake.chat_requests)
    assert plan["tool_choice"] == forced("make_plan") and offered(plan) == ["make_plan"]
    assert "tool_choice" not in step and "finish_step" in offered(step)
    assert finish["tool_choice"] == forced("finish_step") and offered(finish) == ["finish_step"]
    assert "call finish_step" in finish["messages"][-1]["content"]
    assert "tool_choice" not in final and "tools" not in final
    ended = [p for p in terminal.named("plan") if p["phase"] == "step_finished"]
    assert [(p["status"], p["summary"]) for p in ended] == [("done", "saw two files")]
    assert terminal.conversation is not None
    prompts = [r["meta"].get("plan_prompt") for r in terminal.conversation.path()]
    assert [p for p in prompts if p] == ["created", "finish", "final"]


def test_a_step_that_calls_finish_step_itself_is_not_asked_again(openai_fake, tmp_path):
    terminal = planner(openai_fake, tmp_path)
    openai_fake.script(
        Reply(tool_calls=[Call("make_plan", {"steps": ["Look"]})]),
        Reply(tool_calls=[Call("finish_step", {"ok": True, "summary": "looked"})]),
        Reply(content="Done."),
    )
    assert ask(terminal, "look") == "complete"
    assert len(openai_fake.chat_requests) == 3
    assert openai_fake.pending == 0


def test_agent_tool_choice_false_sends_none_and_words_still_plan(openai_fake, tmp_path):
    terminal = planner(openai_fake, tmp_path, tool_choice=False)
    openai_fake.script(
        Reply(content="My plan:\n1. Read the notes\n2. Sum them up\n"),
        Reply(tool_calls=[Call("finish_step", {"ok": True, "summary": "read"})]),
        Reply(tool_calls=[Call("finish_step", {"ok": True, "summary": "summed"})]),
        Reply(content="Summed up."),
    )
    assert ask(terminal, "sum up my notes") == "complete"
    assert not any("tool_choice" in r.body for r in openai_fake.chat_requests)
    created = terminal.named("plan")[0]
    assert [s["title"] for s in created["plan"]["steps"]] == ["Read the notes", "Sum them up"]


def test_a_server_that_ignores_tool_choice_gets_its_words_taken(tmp_path):
    with FakeLLM("openai", ignores_tool_choice=True) as fake:
        terminal = planner(fake, tmp_path)
        fake.script(
            Reply(content="I would just answer."),  # no plan: one step, the request itself
            Reply(content="Answered."),
            Reply(content="The step is done: answered it."),  # asked for finish_step: words
            Reply(content="All done."),
        )
        assert ask(terminal, "answer me") == "complete"
        assert fake.chat_requests[0].body["tool_choice"] == forced("make_plan")
        assert fake.chat_requests[2].body["tool_choice"] == forced("finish_step")
    plan = terminal.named("plan")
    assert [s["title"] for s in plan[0]["plan"]["steps"]] == ["answer me"]
    ended = [p for p in plan if p["phase"] == "step_finished"]
    assert [(p["status"], p["summary"]) for p in ended] == [
        ("done", "The step is done: answered it.")
    ]


def test_a_forcing_server_refuses_a_scripted_reply_that_would_not_call_the_named_tool(
    openai_fake, tmp_path
):
    terminal = planner(openai_fake, tmp_path, max_retries=0)
    openai_fake.script(Reply(content="words, not a plan"))
    assert ask(terminal, "plan it") == "error"
    error = terminal.named("error")[-1]
    assert "tool_choice names 'make_plan'" in error["message"]


THINKING_STEP = (
    Reply(tool_calls=[Call("make_plan", {"steps": ["Look"]})]),
    Reply(content="Looked.", reasoning="Look first."),  # a step's first call thinks
    Reply(tool_calls=[Call("finish_step", {"ok": True, "summary": "looked"})], reasoning="End."),
    Reply(content="Done."),
)


@pytest.mark.parametrize("flavour", ["kimi", "deepseek"])
def test_a_thinking_call_does_not_name_the_tool_where_the_provider_refuses_that(flavour, tmp_path):
    with FakeLLM(flavour) as fake:
        terminal = planner(fake, tmp_path, mode="thinking")
        fake.script(*THINKING_STEP)
        assert ask(terminal, "look") == "complete"
        plan, _, finish, _ = (r.body for r in fake.chat_requests)
    assert plan["tool_choice"] == forced("make_plan")
    assert plan["thinking"] == {"type": "disabled"}
    assert finish["thinking"] == {"type": "enabled"} and "tool_choice" not in finish
    ended = [p for p in terminal.named("plan") if p["phase"] == "step_finished"]
    assert ended[0]["summary"] == "looked"


def test_a_thinking_kimi_call_with_a_named_tool_choice_is_refused_by_the_fake(tmp_path):
    with FakeLLM("kimi") as fake:
        terminal = planner(fake, tmp_path, mode="thinking", tool_choice=True, max_retries=0)
        fake.script(*THINKING_STEP)
        assert ask(terminal, "look") == "error"
    error = terminal.named("error")[-1]
    assert error["code"] == "request_rejected"
    assert "incompatible with thinking enabled" in error["message"]
