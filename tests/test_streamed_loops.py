"""A reply that loops is caught while it streams (core/text_loops.py): the call is stopped (the
fake model sees its connection closed before the reply's end), what streamed is kept, and the
task ends `loop`. A long structured answer, the same headings, tables and lists in every
section, streams to its end and completes: a reply that ended by itself is never relabelled."""

from __future__ import annotations

import time

import pytest

from core.text_loops import LOOP_RUN_CHARS, LoopWatch
from tests.fake_llm import FakeLLM, Reply
from tests.kit.clients import EventClient
from tests.kit.events import payloads
from tests.kit.server import ServerProcess
from tests.kit.waits import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("clean_fake"), pytest.mark.server()]
PARAGRAPH = "I keep checking the configuration file to make sure that the settings are right."


def structured_answer(sections: int = 40) -> str:
    """A complete Markdown answer of `sections` sections, each with the same heading shape,
    table header, list labels and closing line, and its own values between them."""
    parts = ["# Components of the pipeline\n\nEvery component below, one section each."]
    for n in range(1, sections + 1):
        parts.append(
            f"## {n}. Component: queue-{n}\n\n"
            "| Field | Value | Notes |\n|---|---|---|\n"
            f"| Owner | team-{n % 5} | Reviewed in Q{n % 4 + 1} |\n"
            f"| Status | {('green', 'amber', 'red')[n % 3]} | See the runbook for this field |\n"
            f"| Latency | {n * 7 % 93} ms | The 95th percentile over the last seven days |\n\n"
            f"- **Inputs:** the events of queue-{n} and the hourly clock\n"
            "- **Outputs:** a summary row per hour, written to the reporting store\n"
            "- **Errors:** retried three times with a backoff, then sent to the dead letters\n\n"
            "See the summary table above for details on how this component is monitored."
        )
    return "\n\n".join(parts) + "\n"


def fed(text: str, size: int) -> tuple[str, int]:
    """What a fresh watch finds in `text` fed in deltas of `size`, and after how many chars."""
    watch = LoopWatch()
    for start in range(0, len(text), size):
        found = watch.feed(text[start : start + size])
        if found:
            return found, start + size
    return "", len(text)


# --- the watch -------------------------------------------------------------------------------


@pytest.mark.parametrize("size", [1, 7, 64])
def test_a_structured_answer_is_not_a_loop_however_it_is_cut(size: int) -> None:
    assert fed(structured_answer(), size) == ("", len(structured_answer()))


@pytest.mark.parametrize("size", [1, 7, 64])
def test_a_paragraph_said_over_and_over_is_found_soon(size: int) -> None:
    found, at = fed((PARAGRAPH + "\n\n") * 200, size)
    assert found.startswith('"I keep checking the configuration file') and "times so far" in found
    assert at < 4 * len(PARAGRAPH) + LOOP_RUN_CHARS + 200


def test_a_loop_without_spaces_is_found_too() -> None:
    found, at = fed("我会再检查一次配置文件。" * 5000, 13)
    assert found and at < 20_000


def test_a_passage_quoted_twice_is_not_a_loop() -> None:
    passage = " ".join(f"word{n}" for n in range(600))
    assert fed(f"Before:\n\n{passage}\n\nAfter:\n\n{passage}\n", 16)[0] == ""


def test_a_100_kb_reply_costs_the_watch_little_and_no_more_per_delta_late() -> None:
    text = structured_answer(400)[:100_000]
    watch = LoopWatch()
    spent = []
    for start in range(0, len(text), 20):  # about the size of a streamed delta
        began = time.perf_counter()
        assert watch.feed(text[start : start + 20]) == ""
        spent.append(time.perf_counter() - began)
    assert sum(spent) < 2.0, sum(spent)  # some 0.05 s here; room for a loaded machine
    tenth = len(spent) // 10
    early, late = sorted(spent[:tenth]), sorted(spent[-tenth:])
    assert late[tenth // 2] < 20 * early[tenth // 2] + 1e-4  # medians: no re-scan per delta


# --- through the server ----------------------------------------------------------------------


def test_a_40_section_answer_streams_to_its_end_and_completes(
    server: ServerProcess, fake: FakeLLM, client: EventClient
) -> None:
    answer = structured_answer()
    fake.script(Reply(content=answer, chunk_size=40))
    cid = client.start("describe every component")
    events = client.wait_done(cid)
    assert events[-1].payload["reason"] == "complete", payloads(events, "error")
    assert not payloads(events, "error")
    assert "".join(t["text"] for t in payloads(events, "token")) == answer


def test_a_looping_stream_is_stopped_early_and_ends_loop_with_what_streamed(
    server: ServerProcess, fake: FakeLLM, client: EventClient
) -> None:
    endless = (PARAGRAPH + "\n\n") * 2000  # some 170 KB: minutes of paid output
    fake.script(Reply(content=endless, chunk_size=64, delay=0.002))
    cid = client.start("check the configuration")
    events = client.wait_done(cid)
    assert events[-1].payload["reason"] == "loop"
    [error] = payloads(events, "error")
    assert error["code"] == "loop_detected"
    assert "repeated itself" in error["message"] and "I keep checking" in error["message"]
    streamed = "".join(t["text"] for t in payloads(events, "token"))
    assert endless.startswith(streamed) and len(streamed) < 10_000
    assert events[-1].payload["usage"]["completion_tokens"] > 0  # what streamed is billed
    request = fake.chat_requests[-1]
    wait_until(lambda: request.hung_up, 30, "the model call closed before its end")
    record = client.call("get_conversation", {"conversation_id": cid})["messages"][-1]
    assert record["role"] == "assistant" and record["meta"]["interrupted"] == "loop"
    assert record["content"] == streamed
