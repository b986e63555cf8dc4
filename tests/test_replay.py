"""One history, one replay: a client that reloads at any moment of a task renders the history
up to the seq `get_conversation` answers, joins after it, and so sees every token and every
tool result exactly once, in both async modes."""

from __future__ import annotations

import threading
from collections import defaultdict
from typing import Any

import pytest

from tests.fake_llm import Call, FakeLLM, Reply
from tests.kit.clients import assert_contiguous, connected
from tests.kit.events import Received
from tests.kit.server import ServerProcess

FIRST = "Let me write the notes file first, one small piece at a time. "
SECOND = "The notes are written; here is a summary of what they hold."
RELOADS = 12
pytestmark = [pytest.mark.e2e, pytest.mark.server(modes=["threading", "eventlet"])]


def reload_view(url: str, cid: str) -> dict[str, Any]:
    """What a page that reloads now ends up showing once the task is done."""
    with connected(url) as page:
        snapshot = page.call("get_conversation", {"conversation_id": cid})
        assert snapshot["ok"], snapshot
        ack = page.call("join", {"conversation_id": cid, "after_seq": snapshot["seq"]})
        assert ack["ok"] and ack["replays_after"] <= snapshot["seq"] <= ack["last_seq"], ack
        events = page.wait_done(cid) if snapshot["running"] else page.of(cid)
    return {"snapshot": snapshot, "events": [e for e in events if e.payload["seq"]]}


def rendered(view: dict[str, Any]) -> tuple[dict[str, str], dict[str, int]]:
    """Each answer's text and how many results each tool call got, history plus events."""
    texts: dict[str, str] = defaultdict(str)
    results: dict[str, int] = defaultdict(int)
    for record in view["snapshot"]["messages"]:
        if record["role"] == "assistant":
            texts[record["id"]] += record["content"]
        elif record["role"] == "tool":
            results[record["tool_call_id"]] += 1
    for event in view["events"]:
        if event.name == "token":
            texts[event.payload["message_id"]] += event.payload["text"]
        elif event.name == "tool" and event.payload["phase"] == "result":
            results[event.payload["call_id"]] += 1
    return dict(texts), dict(results)


def test_a_reload_at_any_moment_shows_each_token_once(server: ServerProcess, fake: FakeLLM):
    fake.script(
        Reply(
            content=FIRST,
            chunk_size=2,
            delay=0.02,
            tool_calls=[Call("create_file", {"path": "notes.md", "content": "# Notes\n"})],
        ),
        Reply(content=SECOND, chunk_size=2, delay=0.02),
    )
    views: list[dict[str, Any]] = []
    reloads: list[threading.Thread] = []

    def reload() -> None:
        views.append(reload_view(server.url, cid))

    with connected(server.url) as owner:
        cid = owner.start("write notes", approval="auto")
        points = [0]  # how many events the owner had seen when each reload began
        while not any(e.name == "done" for e in owner.of(cid)) and len(reloads) < RELOADS:
            after = points[-1] + 6

            def reached(_: list[Received], n: int = after) -> bool | int:
                return len(owner.of(cid)) >= n and n

            points.append(owner.wait_until(reached))
            reloads.append(threading.Thread(target=reload, daemon=True))
            reloads[-1].start()
        live = owner.wait_done(cid)
    for thread in reloads:
        thread.join(30)
    views.append(reload_view(server.url, cid))
    assert_contiguous(live)
    with connected(server.url) as client:
        final = client.call("get_conversation", {"conversation_id": cid})
    answers = {r["id"]: r["content"] for r in final["messages"] if r["role"] == "assistant"}
    calls = {r["tool_call_id"] for r in final["messages"] if r["role"] == "tool"}
    assert list(answers.values()) == [FIRST, SECOND]
    assert len(points) >= 6, f"too few reloads during the task: {points}"
    covered = {view["snapshot"]["seq"] for view in views}
    assert len(covered) >= 3, f"reloads saw too few history snapshots: {covered}"
    for view in views:
        texts, results = rendered(view)
        assert texts == answers, view["snapshot"]["seq"]
        assert results == dict.fromkeys(calls, 1), view["snapshot"]["seq"]
        if view["events"]:
            assert_contiguous(view["events"])
            assert view["events"][0].payload["seq"] == view["snapshot"]["seq"] + 1


def test_records_carry_the_seq_that_completed_them(server: ServerProcess, fake: FakeLLM):
    fake.script(Reply(content="short answer", chunk_size=4))
    with connected(server.url) as client:
        cid = client.start("hello", approval="auto")
        events = client.wait_done(cid)
        final = client.call("get_conversation", {"conversation_id": cid})
    user, answer = final["messages"][-2:]
    last_token = max(e.payload["seq"] for e in events if e.name == "token")
    first_event = min(e.payload["seq"] for e in events)
    assert user["seq"] == first_event - 1
    assert answer["seq"] == last_token
    assert not final["running"] and final["seq"] == events[-1].payload["seq"]


def test_a_join_older_than_the_log_says_so(server: ServerProcess, fake: FakeLLM):
    fake.script(Reply(content="one"), Reply(content="two"))
    with connected(server.url) as client:
        cid = client.start("first", approval="auto")
        first_end = client.wait_done(cid)[-1].payload["seq"]
        client.start("second", cid, approval="auto")
        client.wait_until(lambda _: sum(e.name == "done" for e in client.of(cid)) == 2)
    with connected(server.url) as late:
        ack = late.call("join", {"conversation_id": cid, "after_seq": first_end - 2})
        replayed = late.of(cid)
    assert ack["ok"] and ack["replays_after"] == first_end, ack
    assert replayed[0].payload["seq"] == first_end + 1
