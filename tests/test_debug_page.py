"""/debug: log lines filtered by conversation and by a task's trace; JSON inside lines laid out."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.fake_llm import Reply
from tests.kit.browser import Served
from tests.kit.settings import TOKEN
from web.routes import read_log


def test_read_log_keeps_the_lines_with_every_asked_field(tmp_path: Path) -> None:
    rows = [
        {"message": "a", "conversation_id": "c1", "trace_id": "t1"},
        {"message": "b", "conversation_id": "c1", "trace_id": "t2"},
        {"message": "c", "conversation_id": "c2", "trace_id": "t3"},
        {"message": "d"},
    ]
    log = tmp_path / "agent.jsonl"
    log.write_text("".join(json.dumps(row) + "\n" for row in rows) + "not json\n[1, 2]\n")

    def messages(match: dict[str, str]) -> list[str]:
        return [json.loads(line)["message"] for line in read_log(log, 0, match)[0]]

    assert messages({"conversation_id": "c1"}) == ["a", "b"]
    assert messages({"trace_id": "t2"}) == ["b"]
    assert messages({"conversation_id": "c1", "trace_id": "t3"}) == []
    lines, end = read_log(log, 0, {})
    assert len(lines) == 6 and end == log.stat().st_size


@pytest.mark.browser
@pytest.mark.e2e
def test_follow_a_conversation_and_a_trace_with_json_laid_out(
    fresh_served: Served, page: Any
) -> None:
    # a server of its own: its filter lists every conversation of the server, two here
    server, fake, _ = fresh_served
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(f"{server.url}/?token={TOKEN}")
    for n, words in enumerate(["first answer", "second answer", "third answer"]):
        if n == 1:
            page.click("[data-testid=new-conversation]")
        fake.script(Reply(content=words))
        page.fill("#message-input", f"task {n}")
        page.press("#message-input", "Enter")
        page.wait_for_selector(f".assistant-message:has-text('{words}')")
        page.wait_for_selector("#stop-button", state="hidden")
    second = page.evaluate("() => location.hash.slice(3)")  # the open one: tasks 1 and 2
    assert second
    page.goto(f"{server.url}/debug")
    page.wait_for_selector("#pane-agent .trace-link")
    assert page.locator("#conversation-filter option").count() == 3  # all, and the two

    page.select_option("#conversation-filter", "")  # "All" stays possible
    page.select_option("#conversation-filter", second)
    page.wait_for_selector("#pane-agent .line:has-text('first answer')", state="detached")
    page.wait_for_selector("#pane-agent .line:has-text('third answer')")
    records = agent_records(page)
    assert records and {r.get("conversation_id") for r in records} == {second}
    assert "conversation_id=" in page.url

    traces = [r["trace_id"] for r in records if r.get("message") == "task started"]
    assert len(traces) == 2  # two tasks in that conversation
    page.click(f"#pane-agent .trace-link[data-trace='{traces[0]}']")
    page.wait_for_selector("[data-testid=trace-chip]:not([hidden])")
    page.wait_for_function("() => document.querySelector('#pane-agent .line') !== null")
    page.wait_for_selector("#pane-agent .line:has-text('task ended')")
    label = page.locator("[data-testid=trace-label]")
    page.wait_for_function(
        "() => document.querySelector('[data-testid=trace-label]').textContent.startsWith('“')"
    )
    title = page.locator(f"#conversation-filter option[value='{second}']").inner_text()
    assert label.inner_text() == f"“task 1” in {title.split(' · ')[0]}", "not a human label"
    assert traces[0] not in label.inner_text()
    records = agent_records(page)
    assert {r["trace_id"] for r in records} == {traces[0]}
    assert "second answer" in page.inner_text("#pane-agent")
    assert "third answer" not in page.inner_text("#pane-agent")
    stream = page.locator("#pane-debug .line")
    stream.first.wait_for()
    shown = " ".join(stream.all_inner_texts())
    assert "second" in shown and "third" not in shown, "the stream is not the trace's"
    assert page.locator("[data-testid=stream-count]").inner_text().endswith(" deltas")
    assert not page.locator("[data-testid=stream-empty]").is_visible()

    stream.first.click()
    detail = page.locator("#pane-debug [data-testid=line-detail]").inner_text()
    laid_out = json.loads(detail)
    assert isinstance(laid_out["raw"], dict), "the JSON held in `raw` is not laid out"
    assert '\n  "raw": {\n' in detail

    page.click("[data-testid=trace-chip] [data-role=clear]")
    page.wait_for_selector("#pane-agent .line:has-text('third answer')")
    assert errors == []


def agent_records(page: Any) -> list[dict[str, Any]]:
    """The agent pane's records as shown: message, trace and the other fields of each line."""
    return page.locator("#pane-agent .line").evaluate_all("""(lines) => lines.map((line) => ({
      ...JSON.parse(line.querySelector(".fields")?.textContent || "{}"),
      message: line.querySelector(".msg")?.textContent,
      trace_id: line.querySelector(".trace-link")?.dataset.trace,
    }))""")
