"""What tasks cost on the wire, through the real server against the fake model: the running
task's tokens and cost in each `status` after a call, `done.usage.cost`, and `get_conversation`'s
conversation and today totals (today's across conversations)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.fake_llm import Call, FakeLLM, Reply
from tests.kit import payloads
from tests.web_helpers import connected, serving

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
