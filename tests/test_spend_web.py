"""What tasks cost on the wire, through the real server against the fake model: the running
task's tokens and cost in each `status` after a call, `done.usage.cost`, and `get_conversation`'s
conversation and today totals (today's across conversations)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.fake_llm import Call, FakeLLM, Reply, long_answer
from tests.kit.clients import EventClient, connected
from tests.kit.events import payloads, tokens
from tests.kit.server import serving

pytestmark = pytest.mark.e2e

FILES = {"a.txt": "alpha\n"}
READ = Call("read_file", {"path": "a.txt"})


def usd(amount: float) -> dict[str, Any]:
    return {"amount": pytest.approx(amount), "currency": "USD"}


def test_status_done_and_get_conversation_carry_the_cost(tmp_path: Path, fake_llm: FakeLLM):
    prices = {fake_llm.model: {"input": 10, "output": 20}}  # 1,000 in + 100 out: $0.012
    env = {"AGENT_PRICES": json.dumps(prices)}
    with serving(tmp_path, fake_llm, env, FILES) as server, connected(server.url) as client:
        fake_llm.script(
            Reply(tool_calls=[READ], usage=(1000, 100), cached_tokens=500),
            Reply(content="Read it.", usage=(1000, 100)),
        )
        cid = client.start("read a.txt")
        client.wait_done(cid)
        statuses = payloads(client.of(cid), "status")
        running = [s["usage"] for s in statuses if s["state"] != "idle"]
        assert running[0] == {"prompt_tokens": 0, "completion_tokens": 0, "cost": None}
        after_one = {
            "prompt_tokens": 1000,
            "completion_tokens": 100,
            "cached_prompt_tokens": 500,
            "cost": usd(0.012),  # the 500 cached at the input rate: no cached_input set
        }
        assert after_one in running
        done = client.dones(cid)[0]
        whole = {**after_one, "prompt_tokens": 2000, "completion_tokens": 200, "cost": usd(0.024)}
        assert done["usage"] == {**whole, "estimated": False}
        assert statuses[-1]["state"] == "idle" and statuses[-1]["usage"] == whole

        fake_llm.script(Reply(content="Hello.", usage=(400, 50)))
        other = client.start("hello")
        client.wait_done(other)
        answer = client.call("get_conversation", {"conversation_id": cid})
        assert answer["spend"]["conversation"] == whole
        today = {"prompt_tokens": 2400, "completion_tokens": 250, "cached_prompt_tokens": 500}
        assert answer["spend"]["today"] == {**today, "cost": usd(0.029)}
        kept = answer["conversation"]["meta"]["task_ends"]
        assert next(iter(kept.values()))["usage"]["cost"] == usd(0.024)


LONG = " ".join(f"w{n}" for n in range(1200))  # ~1,700 tokens, no repeats to catch


def finished(client: EventClient, cid: str, count: int) -> dict[str, Any]:
    """The conversation's `count`-th done, waited for."""
    client.wait_done(cid, count=count)
    return client.dones(cid)[count - 1]


def ledger_lines(data: Path) -> list[dict[str, Any]]:
    days = sorted((data / "spend").glob("*.jsonl"))
    return [json.loads(line) for day in days for line in day.read_text().splitlines()]


def test_condensing_calls_are_priced_and_reach_the_ledger(tmp_path: Path, fake_llm: FakeLLM):
    prices = {fake_llm.model: {"input": 1, "output": 10}}  # $1 a million in, $10 out
    env = {
        "AGENT_PRICES": json.dumps(prices),
        "AGENT_CONTEXT_WINDOW": "20000",
        "AGENT_CONDENSE_THRESHOLD": "0.5",
    }
    files = {"big.txt": "line of text\n" * 1400}
    with serving(tmp_path, fake_llm, env, files) as server, connected(server.url) as client:
        cid: str | None = None
        for number in range(2):
            fake_llm.script(Reply(content=f"answer {number} " + LONG))
            cid = client.start(f"task {number} " + LONG, cid)
            assert finished(client, cid, number + 1)["reason"] == "complete"
        assert cid is not None
        fake_llm.script(
            Reply(tool_calls=[Call("read_file", {"path": "big.txt"})], usage=(9000, 50)),
            Reply(content="A summary: two tasks about words.", usage=(7000, 300)),
            Reply(content="big.txt has 1400 lines.", usage=(2000, 40)),
        )
        client.start("how long is big.txt?", cid)
        done = finished(client, cid, 3)
        assert done["reason"] == "complete"
        phases = [p["phase"] for p in payloads(client.of(cid), "context")]
        assert phases == ["condensing", "condensed"]
        # 18,000 in at $1 and 390 out at $10 a million: the summary call's share included
        assert done["usage"]["prompt_tokens"] == 18000
        assert done["usage"]["cost"] == usd(0.0219)
        lines = [line for line in ledger_lines(server.data_dir) if line["conversation_id"] == cid]
        assert len(lines) == len(fake_llm.chat_requests) == 5
        summary = lines[3]
        assert (summary["prompt_tokens"], summary["completion_tokens"]) == (7000, 300)
        assert summary["cost"] == usd(0.01) and summary["model"] == fake_llm.model

        # asked for outside any task (the socket's compact): the day's ledger still has it
        fake_llm.script(Reply(content="answer 3 " + LONG, usage=(100, 10)))
        client.start("task 3 " + LONG, cid)
        assert finished(client, cid, 4)["reason"] == "complete"
        before = client.call("get_conversation", {"conversation_id": cid})["spend"]["today"]
        fake_llm.script(Reply(content="Four questions, one about big.txt.", usage=(6000, 100)))
        assert client.call("compact", {"conversation_id": cid})["ok"] is True
        client.wait_until(
            lambda evs: len(payloads(evs, "context", phase="condensed")) == 2, what="condensed"
        )
        after = client.call("get_conversation", {"conversation_id": cid})["spend"]["today"]
        assert after["prompt_tokens"] == before["prompt_tokens"] + 6000
        assert ledger_lines(server.data_dir)[-1]["cost"] == usd(0.007)


def test_a_summary_from_a_server_that_counts_nothing_is_an_estimate(tmp_path: Path):
    with FakeLLM(flavour="llamacpp") as fake:  # no usage, even when asked
        env = {"AGENT_PROVIDER": "custom", "AGENT_MODEL": fake.model}
        with serving(tmp_path, fake, env, FILES) as server, connected(server.url) as client:
            cid: str | None = None
            for number in range(2):  # the newest turn is always kept whole: two to condense
                fake.script(Reply(content=f"answer {number} " + LONG))
                cid = client.start(f"task {number} " + LONG, cid)
                assert finished(client, cid, number + 1)["reason"] == "complete"
            fake.script(Reply(content="A summary: two tasks about words."))
            ack = client.call("compact", {"conversation_id": cid})
            assert ack["ok"] is True, ack
            client.wait_until(
                lambda evs: payloads(evs, "context", phase="condensed"), what="condensed"
            )
            summary = ledger_lines(server.data_dir)[-1]
    # the summary request holds the task's two long messages: far more than nothing
    assert summary.get("estimated") is True, summary
    assert summary["prompt_tokens"] > len(LONG) / 8 and summary["completion_tokens"] > 0


def test_a_stopped_task_counts_what_streamed_before_the_stop(tmp_path: Path, fake_llm: FakeLLM):
    """A provider bills the output it streamed though no usage came: the task's done, the
    ledger and so the budgets count it, estimated (issue: a stop reported 0 in · 0 out)."""
    prices = {fake_llm.model: {"input": 1, "output": 10}}
    env = {"AGENT_PRICES": json.dumps(prices)}
    with serving(tmp_path, fake_llm, env, FILES) as server, connected(server.url) as client:
        fake_llm.script(Reply(content=long_answer("word", 2000), chunk_size=5, delay=0.02))
        cid = client.start("write at length")
        client.wait_until(lambda _: len(tokens(client.of(cid))) >= 20, 20, "a streaming answer")
        assert client.call("cancel", {"conversation_id": cid}) == {"ok": True}
        done = finished(client, cid, 1)
        assert done["reason"] == "cancelled"
        usage = done["usage"]
        assert usage["estimated"] is True
        assert usage["prompt_tokens"] > 0 and usage["completion_tokens"] >= 20
        assert usage["cost"]["amount"] > 0
        [line] = [line for line in ledger_lines(server.data_dir) if line["conversation_id"] == cid]
        assert line["completion_tokens"] == usage["completion_tokens"]
        assert line["model"] == fake_llm.model and line["cost"]["amount"] > 0
