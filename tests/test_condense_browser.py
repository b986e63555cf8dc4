"""The page condenses a conversation: the Compact button, greyed turns, the summary, the meter."""

from __future__ import annotations

import pytest

from tests.fake_llm import Reply, long_answer
from tests.kit.clients import connected
from tests.kit.settings import TOKEN

SUMMARY = "The user asked three questions about fruit; the answers were long."
pytestmark = [
    pytest.mark.browser,
    pytest.mark.e2e,
    pytest.mark.usefixtures("clean_fake"),
    pytest.mark.server(env={"AGENT_CONTEXT_WINDOW": "40000"}),  # the meter moves visibly
]


def _meter(page) -> int:
    return int(page.get_attribute("#context-meter", "aria-valuenow") or 0)


def test_compact_greys_the_older_turns_shows_the_summary_and_drops_the_meter(served, page):
    server, fake, _ = served
    with connected(server.url) as client:
        cid = None
        for number in range(3):
            fake.script(Reply(content=f"answer {number} " + long_answer("about fruit", 400)))
            cid = client.start(f"question {number}", cid)
            client.wait_done(cid, count=number + 1)

    page.goto(f"{server.url}/?token={TOKEN}#c={cid}")
    page.wait_for_selector(".assistant-message:has-text('answer 2')")
    fake.script(Reply(content="a short reply"))
    page.fill("#message-input", "one more")
    page.press("#message-input", "Enter")
    page.wait_for_selector(".assistant-message:has-text('a short reply')")
    page.wait_for_function(
        "() => Number(document.querySelector('#context-meter').getAttribute('aria-valuenow')) > 0"
    )
    before = _meter(page)

    fake.script(Reply(content=SUMMARY, delay=0.05))
    page.click("[data-testid=compact]")
    page.wait_for_selector("[data-testid=context-summary]")
    assert page.locator("[data-testid=condensing]").count() == 0
    page.click("[data-testid=context-summary] > summary")
    assert SUMMARY in page.inner_text("[data-testid=context-summary]")
    greyed = page.locator("#conversation > .condensed")
    assert greyed.count() >= 5  # answer 0, question 1, answer 1, question 2, answer 2 …
    assert "question 0" not in " ".join(greyed.all_inner_texts())  # the first message is kept
    assert "answer 0" in " ".join(greyed.all_inner_texts())
    order = page.eval_on_selector_all(
        "#conversation > *",
        "els => els.map(el => el.matches('[data-testid=context-summary]')"
        " ? 'summary' : el.classList.contains('condensed') ? 'grey' : "
        "el.classList.contains('user-message') ? 'user' : 'other')",
    )
    at = order.index("summary")
    assert "grey" in order[:at] and "grey" not in order[at:]
    assert order[at + 1] == "user"  # the newest turn, sent as it is
    after = _meter(page)
    assert 0 < after < before * 0.75, (before, after)

    page.reload()
    page.wait_for_selector("[data-testid=context-summary]")
    assert page.locator("#conversation > .condensed").count() == greyed.count()
    page.wait_for_function(
        "value => document.querySelector('#context-meter').getAttribute('aria-valuenow') === value",
        arg=str(after),
    )
    assert page.console_errors == []
