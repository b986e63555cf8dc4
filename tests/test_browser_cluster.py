"""The page on one process of a scaled-out server, following a task that runs on the other,
while redis-server restarts: it shows every token once and the task's end, without being
reloaded (two `main.py web` processes, a real redis-server, headless Chromium)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.fake_llm import FakeLLM, Reply
from tests.kit.browser import open_page
from tests.kit.clients import connected
from tests.kit.cluster import RedisServer, cluster, missing_programs

pytestmark = [
    pytest.mark.browser,
    pytest.mark.e2e,
    pytest.mark.skipif(missing_programs() is not None, reason=str(missing_programs())),
]

CONNECTION = "#status-bar [data-role=connection]"
# 200 words in 5-character chunks, one every 30 ms: a 6 s answer, still streaming once
# redis-server is back.
WORDS = " ".join(f"w{n:03d}" for n in range(200))


def test_the_page_follows_a_task_of_the_other_process_through_a_redis_restart(
    redis: RedisServer, fake: FakeLLM, browser: Any, tmp_path: Path
) -> None:
    with cluster(tmp_path, redis.url(0), base_url=fake.base_url, api_key=fake.api_key) as servers:
        a, b = servers
        fake.script(Reply(content=WORDS, chunk_size=5, delay=0.03))
        ready = [f"{CONNECTION}[data-state=connected]"]
        with (
            connected(a.url) as on_a,
            open_page(browser, (b, fake, b.workspace), ready=ready) as page,
        ):
            cid = on_a.start("count slowly")
            page.click(f'.conv-item[data-conversation-id="{cid}"]')
            answer = page.locator(".assistant-message .answer").first
            page.wait_for_selector(".assistant-message .answer:has-text('w010')")
            page.evaluate("window.sameDocument = true")
            redis.stop()
            sent = len(on_a.of(cid))
            on_a.wait_until(lambda _: len(on_a.of(cid)) >= sent + 20, what="A streaming on")
            redis.start()
            page.wait_for_selector('.task-end[data-reason="complete"]', state="attached")
            assert answer.inner_text().strip() == WORDS
            assert page.locator(".task-end").count() == 1
            assert page.evaluate("window.sameDocument") is True
