"""The page in a real headless Chromium against the real server and the fake model."""

from __future__ import annotations

import re

import pytest

from tests.fake_llm import Call, Reply, long_answer
from tests.kit.browser import AGENTS_LOADED, ARTIFACTS, chosen_agent, patience, pick_agent
from tests.kit.server import ServerProcess
from tests.kit.settings import TOKEN

PLANNER = "name: planner\ndescription: Plans the task, then does it.\nmode: plan_execute\n"
GREET_SKILL = "---\nname: greet\ndescription: Greets the user.\n---\nSay hello like a friend.\n"

# One server for the module, each test in a conversation of its own: its workspace defines a
# plan_execute agent and skills (read at start-up), trusted to (a workspace's agent may not
# otherwise work in a mode of more model calls).
pytestmark = [
    pytest.mark.browser,
    pytest.mark.e2e,
    pytest.mark.usefixtures("clean_fake"),
    pytest.mark.server(
        env={"AGENT_TRUST_WORKSPACE_AGENTS": "true"},
        files={
            "README.md": "# demo\n",
            ".agents/agents/planner.yaml": PLANNER,
            ".agents/skills/greet/SKILL.md": GREET_SKILL,
            ".agents/skills/grumpy/SKILL.md": "no front matter\n",
        },
    ),
]


def test_a_task_streams_into_the_page_and_stop_ends_a_slow_one(served, page):
    server, fake, _ = served
    fake.script(
        Reply(
            reasoning="",
            tool_calls=[
                Call(
                    "create_file",
                    {"path": "hello.py", "content": "print('hi')\n", "annotation": "greets"},
                )
            ],
        ),
        Reply(content="Created **hello.py**:\n\n```python\nprint('hi')\n```\n", chunk_size=4),
        Reply(content=long_answer("slow words", 400), chunk_size=6, delay=0.03),
    )
    page.goto(f"{server.url}/?token={TOKEN}")
    assert "token=" not in page.url
    page.wait_for_selector('#file-tree [data-path="README.md"]')

    page.fill("#message-input", "make a hello script")
    page.press("#message-input", "Enter")
    page.wait_for_selector('.tool-card[data-state="ok"]')
    assert "create_file" in page.inner_text(".tool-card")
    page.wait_for_selector('#file-tree [data-path="hello.py"]')
    page.wait_for_selector(".assistant-message strong:has-text('hello.py')")
    page.locator(".assistant-message pre code", has_text="print('hi')").last.wait_for()
    page.wait_for_selector(
        '.task-end[data-reason="complete"], #stop-button[hidden]', state="attached"
    )

    page.fill("#message-input", "now talk slowly")
    page.press("#message-input", "Enter")
    page.wait_for_selector(".assistant-message:last-of-type:has-text('slow words')")
    page.click("#stop-button")
    page.wait_for_selector('.task-end[data-reason="cancelled"]')
    answer = page.locator(".assistant-message").last.inner_text()
    assert answer.count("slow words") < 400

    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "workspace.png"))
    assert page.console_errors == []


def test_reload_mid_task_shows_each_token_once_and_the_approval_still_waits(served, page):
    server, fake, _ = served
    words = " ".join(f"w{n:03d}" for n in range(120))
    fake.script(
        Reply(
            content=words,
            chunk_size=5,
            delay=0.02,
            tool_calls=[Call("run_command", {"command": "echo approved-and-ran"})],
        ),
        Reply(content="All done."),
    )
    page.goto(f"{server.url}/?token={TOKEN}")
    page.select_option("#approval-select", "ask")
    page.fill("#message-input", "count slowly, then run a command")
    page.press("#message-input", "Enter")
    page.wait_for_selector(".assistant-message:has-text('w010')")
    page.reload()
    page.wait_for_selector(".tool-card[data-state=approval] .tool-approval", timeout=patience(20))
    answer = page.locator(".assistant-message").first.inner_text()
    assert answer.count("w000") == 1 and answer.count("w119") == 1
    assert " ".join(re.findall(r"\bw\d{3}\b", answer)) == words

    page.reload()
    page.wait_for_selector(".tool-card[data-state=approval] .tool-approval")
    assert page.locator(".tool-card").count() == 1
    page.click(".tool-card [data-testid=approve]")
    page.wait_for_selector('.task-end[data-reason="complete"]')
    assert "approved-and-ran" in page.inner_text(".tool-card")
    page.reload()
    page.wait_for_selector(".assistant-message:has-text('All done.')")
    text = page.inner_text("#conversation")
    assert text.count("w119") == 1 and text.count("All done.") == 1
    assert page.console_errors == []


def _open_with_agent(page, server: ServerProcess, agent: str) -> None:
    page.goto(f"{server.url}/?token={TOKEN}")
    pick_agent(page, agent)


def _follows(page, earlier: str, later: str) -> bool:
    """Whether the first element `later` matches comes after the first `earlier` matches."""
    return page.locator(earlier).first.evaluate(
        "(a, b) => Boolean(a.compareDocumentPosition(b) & Node.DOCUMENT_POSITION_FOLLOWING)",
        page.locator(later).first.element_handle(),
    )


def test_a_plan_is_a_live_checklist_and_survives_a_reload(served, page):
    server, fake, _ = served
    fake.script(
        Reply(tool_calls=[Call("make_plan", {"steps": ["Look", "Write"]})]),
        Reply(tool_calls=[Call("list_files", {})]),
        Reply(tool_calls=[Call("finish_step", {"ok": True, "summary": "looked"})]),
        Reply(tool_calls=[Call("finish_step", {"ok": True, "summary": "wrote"})]),
        Reply(content="Final answer"),
    )
    _open_with_agent(page, server, "planner")
    page.fill("#message-input", "look, then write")
    page.press("#message-input", "Enter")
    page.wait_for_selector('.task-end[data-reason="complete"]', state="attached")

    def check_plan() -> None:
        plan = page.locator("[data-testid=plan]")
        assert plan.count() == 1
        steps = plan.locator(".plan-step")
        assert steps.count() == 2
        assert page.locator('.plan-step[data-status="done"]').count() == 2
        assert "Look" in steps.nth(0).inner_text() and "looked" in steps.nth(0).inner_text()
        assert "Write" in steps.nth(1).inner_text() and "wrote" in steps.nth(1).inner_text()
        page.wait_for_selector(".assistant-message:has-text('Final answer')")
        assert _follows(page, "[data-testid=plan]", ".assistant-message:has(.answer)")
        assert page.locator(".user-message").count() == 1  # the plan's own prompts are no bubbles
        assert page.locator(".edit-button:visible").count() <= 1
        text = page.inner_text("#conversation")
        assert "Before doing anything" not in text and "Do this step now" not in text
        assert text.count("Step 1: Look") == 1 and text.count("Step 2: Write") == 1
        assert page.locator('.tool-card[data-tool="list_files"]').is_visible()
        assert page.locator('.tool-card[data-tool="make_plan"]').is_hidden()
        assert page.inner_text("[data-testid=status-agent]") == "planner"

    check_plan()
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "plan.png"))
    page.reload()
    page.wait_for_selector("[data-testid=plan] .plan-step")
    check_plan()
    assert chosen_agent(page) == "planner"
    assert page.console_errors == []


def test_a_sub_agent_works_inside_the_card_of_the_delegating_call(served, page):
    server, fake, _ = served
    fake.script(
        Reply(tool_calls=[Call("delegate_to_coder", {"task": "make hello.txt"})]),
        Reply(
            content="Creating it.",
            tool_calls=[Call("create_file", {"path": "hello.txt", "content": "hi"})],
        ),
        Reply(content="Done: hello.txt"),
        Reply(content="The coder made hello.txt."),
    )
    _open_with_agent(page, server, "supervisor")
    page.fill("#message-input", "get a hello file made")
    page.press("#message-input", "Enter")
    page.wait_for_selector('.task-end[data-reason="complete"]', state="attached")
    card = page.locator('.tool-card[data-tool="delegate_to_coder"]')
    assert card.count() == 1
    nested = card.locator(".sub-agent")
    assert nested.get_attribute("data-agent") == "coder"
    report = card.locator(":scope > .tool-body > .tool-output")
    assert report.get_attribute("open") is None  # folded: the supervisor answers from it next
    assert "Done: hello.txt" in (report.text_content() or "")
    card.locator(".sub-agent-head").click()  # the sub-agent's work folded when it ended
    assert "Creating it." in nested.locator(".answer").first.inner_text()
    created = nested.locator('.tool-card[data-tool="create_file"][data-state="ok"]')
    assert created.count() == 1
    assert created.locator(".tool-output").count() == 1  # the report did not take its place
    assert page.locator(".tool-card").count() == 2
    page.wait_for_selector('#file-tree [data-path="hello.txt"]')
    final = ".assistant-message:has-text('The coder made hello.txt.')"
    page.wait_for_selector(final)
    assert _follows(page, '.tool-card[data-tool="delegate_to_coder"]', final)
    assert page.inner_text("[data-testid=status-agent]") == "supervisor"
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "sub-agent.png"))

    page.reload()  # the history keeps the call and its report, not the sub-agent's transcript
    page.wait_for_selector(final)
    card = page.locator('.tool-card[data-tool="delegate_to_coder"][data-state="ok"]')
    card.locator(".tool-output > summary").click()  # the report, folded, is a click away
    assert "Done: hello.txt" in card.inner_text()
    assert chosen_agent(page) == "supervisor"
    assert page.console_errors == []


def test_a_sub_agents_call_waits_for_approval_inside_the_delegating_card(served, page):
    server, fake, _ = served
    fake.script(
        Reply(tool_calls=[Call("delegate_to_coder", {"task": "say hi"})]),
        Reply(tool_calls=[Call("run_command", {"command": "echo nested-ran"})]),
        Reply(content="Ran it."),
        Reply(content="All done."),
    )
    _open_with_agent(page, server, "supervisor")
    page.select_option("#approval-select", "ask")
    page.fill("#message-input", "run something through the coder")
    page.press("#message-input", "Enter")
    nested = (
        '.tool-card[data-tool="delegate_to_coder"] .sub-agent .tool-card[data-tool="run_command"]'
    )
    page.wait_for_selector(f"{nested}[data-state=approval] .tool-approval")
    page.reload()  # the approval still waits, in the same place
    page.wait_for_selector(f"{nested}[data-state=approval] .tool-approval")
    page.click(f"{nested} [data-testid=approve]")
    page.wait_for_selector('.task-end[data-reason="complete"]', state="attached")
    page.locator('.tool-card[data-tool="delegate_to_coder"] .sub-agent-head').click()
    assert "nested-ran" in page.inner_text(nested)
    page.wait_for_selector(".assistant-message:has-text('All done.')")
    assert page.console_errors == []


def test_skill_names_complete_after_slash_skill_and_messages_show_theirs(served, page):
    server, fake, _ = served
    fake.script(Reply(content="Hello, friend!"))
    page.goto(f"{server.url}/?token={TOKEN}")
    page.wait_for_selector(AGENTS_LOADED, state="attached")
    page.click("#message-input")
    page.keyboard.type("/skill g")
    menu = page.locator("[data-testid=command-menu]")
    menu.wait_for()
    assert menu.locator(".command-option").count() == 2
    broken = menu.locator('.command-option[data-name="grumpy"]')
    assert broken.get_attribute("aria-disabled") == "true" and broken.get_attribute("title")
    page.keyboard.press("ArrowDown")  # the broken one is skipped
    assert menu.locator('[aria-selected="true"]').get_attribute("data-name") == "greet"
    page.keyboard.press("Escape")
    assert menu.is_hidden()
    page.keyboard.type("r")
    menu.wait_for()
    page.keyboard.press("Tab")
    assert page.input_value("#message-input") == "/skill greet "
    assert menu.is_hidden()
    page.keyboard.type("say hi")
    page.keyboard.press("Enter")
    page.wait_for_selector(".assistant-message:has-text('Hello, friend!')")
    bubble = page.locator(".user-message")
    assert bubble.locator(".bubble").inner_text() == "say hi"
    assert bubble.locator("[data-testid=skill-chip]").inner_text() == "skill: greet"
    assert "Say hello like a friend." in fake.chat_requests[-1].messages[-1]["content"]

    page.fill("#message-input", "/skill nosuch hello")
    page.press("#message-input", "Escape")
    page.press("#message-input", "Enter")
    page.wait_for_selector("#composer-error:not([hidden])")
    assert "nosuch" in page.inner_text("#composer-error")
    assert page.input_value("#message-input") == "/skill nosuch hello"
    page.reload()
    page.wait_for_selector("[data-testid=skill-chip]")
    assert page.console_errors == []
