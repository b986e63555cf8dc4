"""The server stopped (SIGTERM) while tasks run, as real processes: each task ends as
`interrupted`, with an error saying the server stopped, never as the user's own `cancelled`;
that end is kept (`task_ends`, docs/protocol.md §5), the stop stays quick, and after the restart
the page offers Retry / Continue for it, as after a crash."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fake_llm import FakeLLM, Reply
from tests.kit.browser import collect_errors, new_context
from tests.kit.clients import EventClient, connected
from tests.kit.events import tokens
from tests.kit.server import ServerProcess
from tests.kit.settings import TOKEN
from web_server import SHUTDOWN_GRACE_SECONDS

pytestmark = pytest.mark.e2e

TASKS = 10
FOLLOWUP = '.task-end[data-reason="interrupted"] + [data-testid=task-followup]'
# A tab the test can hide (headless tabs never are), as tests/test_browser_attention.py does.
HIDDEN_TAB = """
let hidden = false;
Object.defineProperty(document, "hidden", { get: () => hidden, configurable: true });
window.__hide = () => { hidden = true; document.dispatchEvent(new Event("visibilitychange")); };
"""


def endless() -> Reply:
    """An answer still streaming when the server is stopped (a minute and a half of it)."""
    return Reply(content="z" * 1800, chunk_size=1, delay=0.05)


def wait_streaming(client: EventClient, cid: str) -> None:
    client.wait_until(lambda _: tokens(client.of(cid)), 20, f"a token of {cid}")


def task_end(data: Path, cid: str, message_id: str) -> dict[str, Any]:
    meta = json.loads((data / "conversations" / cid / "meta.json").read_text())
    return dict(meta["meta"]["task_ends"][message_id])


@pytest.mark.parametrize("mode", ["threading", "eventlet"])
def test_sigterm_ends_every_running_task_as_interrupted(
    fake_llm: FakeLLM, tmp_path: Path, mode: str
) -> None:
    fake_llm.script(*(endless() for _ in range(TASKS)))
    data = tmp_path / "data"
    server = ServerProcess(
        tmp_path / "ws",
        data,
        base_url=fake_llm.base_url,
        api_key=fake_llm.api_key,
        async_mode=mode,
    ).start()
    with contextlib.ExitStack() as stack:
        clients = [stack.enter_context(connected(server.url)) for _ in range(TASKS)]
        started: list[tuple[EventClient, str, str]] = []
        for number, client in enumerate(clients):
            ack = client.call("send_message", {"conversation_id": None, "text": f"task {number}"})
            started.append((client, ack["conversation_id"], ack["message_id"]))
        for client, cid, _ in started:
            wait_streaming(client, cid)
        asked = time.monotonic()
        assert server.stop(signum=signal.SIGTERM) == 0
        stopped_in = time.monotonic() - asked
        for client, cid, _ in started:
            events = client.wait_done(cid, timeout=1)
            assert events[-1].payload["reason"] == "interrupted", events[-1]
            errors = [e.payload for e in events if e.name == "error"]
            assert [e["code"] for e in errors] == ["interrupted"]
            assert "server was stopped" in errors[0]["message"]
            assert "not your Stop" in errors[0]["message"]
    assert stopped_in < SHUTDOWN_GRACE_SECONDS, f"the stop took {stopped_in:.1f} s"
    for _, cid, message_id in started:
        assert task_end(data, cid, message_id)["reason"] == "interrupted"
    with connected(server.start().url) as client:
        _, cid, message_id = started[0]
        got = client.call("get_conversation", {"conversation_id": cid})
        assert got["running"] is False
        assert got["conversation"]["meta"]["task_ends"][message_id]["reason"] == "interrupted"
    server.stop()


@pytest.fixture
def restarted(fake_llm: FakeLLM, tmp_path: Path) -> Iterator[ServerProcess]:
    server = ServerProcess(
        tmp_path / "ws", tmp_path / "data", base_url=fake_llm.base_url, api_key=fake_llm.api_key
    )
    try:
        yield server
    finally:
        server.stop()


@pytest.mark.browser
def test_the_page_shows_a_stop_of_the_server_as_interrupted(
    browser: Any, fake_llm: FakeLLM, restarted: ServerProcess
) -> None:
    fake_llm.script(endless(), Reply(content="Going on."))
    server = restarted.start()
    context = new_context(browser, viewport={"width": 1300, "height": 900})
    context.add_init_script(HIDDEN_TAB)
    page = context.new_page()
    page.goto(f"{server.url}/?token={TOKEN}")
    page.wait_for_selector("#reconnect-banner[data-state]", state="attached")
    page.fill("#message-input", "a long story")
    page.press("#message-input", "Enter")
    page.wait_for_selector(".assistant-message:has-text('zzz')")
    page.evaluate("window.__hide()")
    assert server.stop(signum=signal.SIGTERM) == 0
    page.wait_for_selector(FOLLOWUP)  # live, as the `done` arrived
    assert page.title().startswith("■ Interrupted")
    cid = page.evaluate("new URL(location.href).hash.slice(3)")
    context.close()

    server.start()
    context = new_context(browser, viewport={"width": 1300, "height": 900})
    page = context.new_page()
    errors = collect_errors(page)
    page.goto(f"{server.url}/?token={TOKEN}#c={cid}")
    page.wait_for_selector(FOLLOWUP)  # from the stored end of the task
    assert "Interrupted" in page.inner_text('.task-end[data-reason="interrupted"]')
    page.click("[data-testid=continue]")
    page.wait_for_selector(".assistant-message:has-text('Going on.')")
    assert [m["content"] for m in fake_llm.chat_requests[-1].messages if m["role"] == "user"] == [
        "a long story",
        "continue",
    ]
    context.close()
    assert errors == []


def test_ctrl_c_in_the_terminal_stops_the_server_without_a_traceback(
    fake_llm: FakeLLM, tmp_path: Path
) -> None:
    """Ctrl-C in a terminal signals the whole foreground process group: the server's children
    (the file watcher, the undo baseline) must not die printing KeyboardInterrupt."""
    server = ServerProcess.in_folder(tmp_path, fake_llm, wrap=["setsid"]).start()
    pid = server.pid
    assert pid is not None
    with connected(server.url) as client:  # the watcher and the baseline started meanwhile
        client.call("get_file_tree", {})
    os.killpg(pid, signal.SIGINT)
    assert server.exited() == 0
    assert "Traceback" not in server.stderr and "KeyboardInterrupt" not in server.stderr, (
        server.stderr
    )
