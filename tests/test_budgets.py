"""Budgets that stop a task, through the real server and CLI against the fake model: a task's,
a conversation's, a day's (two conversations) and an agent's, never passed by more than one
model call, and a limit raised for one task."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.fake_llm import Call, FakeLLM, Reply
from tests.kit.clients import EventClient, connected
from tests.kit.events import payloads
from tests.kit.server import agent_argv, agent_env, serving
from tests.kit.tty import Tmux, needs_tmux

pytestmark = pytest.mark.e2e

FILES = {"a.txt": "alpha\n"}
HINT = "stopped: a budget is used up; /continue --raise LIMIT goes on, once."


def reading(prompt: int, completion: int) -> Reply:
    """A call to read a.txt that says it used these tokens."""
    return Reply(tool_calls=[Call("read_file", {"path": "a.txt"})], usage=(prompt, completion))


def budget_of(scope: str, limit: float, used: float, unit: str = "tokens") -> dict[str, Any]:
    """A `done.budget` as the server sends it."""
    return {
        "scope": scope,
        "limit": {"amount": limit, "unit": unit},
        "used": {"amount": used, "unit": unit},
    }


def finish(client: EventClient, cid: str, count: int = 1) -> dict[str, Any]:
    """The conversation's `count`-th done, waited for."""
    client.wait_done(cid, count=count)
    return client.dones(cid)[count - 1]


def errors(client: EventClient, cid: str) -> list[dict[str, Any]]:
    return payloads(client.of(cid), "error", code="budget_reached")


def test_task_budget_stops_before_the_call_past_it_then_a_raise_goes_on_once(
    tmp_path: Path, fake_llm: FakeLLM
):
    env = {"AGENT_BUDGET_TASK": "1k tokens"}
    with serving(tmp_path, fake_llm, env, FILES) as server, connected(server.url) as client:
        fake_llm.script(reading(600, 100), reading(600, 100))
        cid = client.start("read a.txt again and again")
        done = finish(client, cid)
        assert done["reason"] == "budget"
        assert done["budget"] == budget_of("task", 1000, 1400)
        assert len(fake_llm.chat_requests) == 2  # 700 < 1000 asked once more, 1400 not
        message = errors(client, cid)[0]["message"]
        assert "task budget of 1,000 tokens is reached: this task has used 1,400" in message

        lower = {"scope": "task", "limit": "900 tokens"}
        ack = client.call(
            "send_message", {"conversation_id": cid, "text": "go on", "budget_override": lower}
        )
        assert ack["ok"] is False and ack["error"]["code"] == "invalid"
        assert "must be higher than the limit (1,000 tokens)" in ack["error"]["message"]
        none = {"scope": "day", "limit": "5k tokens"}
        ack = client.call(
            "send_message", {"conversation_id": cid, "text": "go on", "budget_override": none}
        )
        assert ack["ok"] is False and "no day budget to raise" in ack["error"]["message"]

        fake_llm.script(
            reading(600, 100), reading(600, 100), Reply("done reading", usage=(600, 100))
        )
        raised = {"scope": "task", "limit": "3000 tokens"}
        client.start("Continue", cid, budget_override=raised)
        assert finish(client, cid, 2)["reason"] == "complete"

        fake_llm.script(reading(600, 100), reading(600, 100))
        client.start("once more", cid)
        assert finish(client, cid, 3)["budget"]["limit"] == {
            "amount": 1000,
            "unit": "tokens",
        }  # the raise was once
        assert len(fake_llm.chat_requests) == 2 + 3 + 2


def test_conversation_budget_counts_the_tasks_before(tmp_path: Path, fake_llm: FakeLLM):
    env = {"AGENT_BUDGET_CONVERSATION": "2000"}
    with serving(tmp_path, fake_llm, env, FILES) as server, connected(server.url) as client:
        fake_llm.script(Reply("first", usage=(900, 100)), Reply("second", usage=(900, 100)))
        cid = client.start("one")
        assert finish(client, cid)["reason"] == "complete"
        client.start("two", cid)
        assert finish(client, cid, 2)["reason"] == "complete"
        client.start("three", cid)
        done = finish(client, cid, 3)
        assert done["reason"] == "budget" and done["usage"]["prompt_tokens"] == 0
        assert done["budget"] == budget_of("conversation", 2000, 2000)
        assert "this conversation has used 2,000 tokens" in errors(client, cid)[0]["message"]
        assert len(fake_llm.chat_requests) == 2

        fake_llm.script(Reply("a new conversation has its own", usage=(900, 100)))
        other = client.start("four")
        assert finish(client, other)["reason"] == "complete"

        meta = json.loads((tmp_path / "data" / "conversations" / cid / "meta.json").read_text())
        ends = list(meta["meta"]["task_ends"].values())
        assert [e["reason"] for e in ends] == ["complete", "complete", "budget"]
        assert ends[-1]["budget"] == done["budget"]


def test_day_budget_spans_conversations_and_estimates_say_so(tmp_path: Path, fake_llm: FakeLLM):
    env = {"AGENT_BUDGET_DAY": "1500 tokens"}
    with serving(tmp_path, fake_llm, env, FILES) as server, connected(server.url) as client:
        fake_llm.script(Reply("first", usage=(1000, 200)))
        first = client.start("one")
        assert finish(client, first)["reason"] == "complete"
        fake_llm.script(reading(200, 100))
        second = client.start("another conversation")
        done = finish(client, second)
        assert done["reason"] == "budget"
        assert done["budget"] == budget_of("day", 1500, 1500)
        assert "today's tasks have used 1,500 tokens" in errors(client, second)[0]["message"]
        assert len(fake_llm.chat_requests) == 2


def test_estimated_usage_is_said_to_be_one(tmp_path: Path):
    with FakeLLM(flavour="llamacpp") as fake:
        env = {"AGENT_PROVIDER": "custom", "AGENT_MODEL": fake.model, "AGENT_BUDGET_TASK": "10"}
        with serving(tmp_path, fake, env, FILES) as server, connected(server.url) as client:
            fake.script(reading(0, 0))
            cid = client.start("read it")
            done = finish(client, cid)
            assert done["reason"] == "budget" and done["budget"]["estimated"] is True
            assert (
                "estimated in part: the server sent no usage" in errors(client, cid)[0]["message"]
            )


def test_agent_budget_replaces_the_settings_task_budget(tmp_path: Path, fake_llm: FakeLLM):
    agents = tmp_path / "data" / "agents"
    agents.mkdir(parents=True)
    (agents / "frugal.yaml").write_text(
        "name: frugal\ndescription: Spends little.\nbudget: 500 tokens\n"
    )
    env = {"AGENT_BUDGET_TASK": "100k tokens"}
    with serving(tmp_path, fake_llm, env, FILES) as server, connected(server.url) as client:
        fake_llm.script(reading(400, 100))
        cid = client.start("read", agent="frugal")
        assert finish(client, cid)["budget"] == budget_of("task", 500, 500)
        fake_llm.script(reading(400, 100), Reply("the general agent goes on", usage=(400, 100)))
        client.start("read", cid, agent="general")
        assert finish(client, cid, 2)["reason"] == "complete"


def test_a_bad_budget_setting_is_refused_at_start(tmp_path: Path, fake_llm: FakeLLM):
    workspace, data = tmp_path / "ws", tmp_path / "data"
    workspace.mkdir()
    env = agent_env(fake_llm.base_url, fake_llm.api_key, AGENT_BUDGET_DAY="lots")
    result = _run(agent_argv("cli", workspace, data, "-p", "hi"), env)
    assert result.returncode == 2
    assert (
        "budget_day" in result.stderr
        and "'lots' is not a budget: write a budget as tokens" in result.stderr
    )


def test_cli_stops_with_exit_5_and_says_which_budget(tmp_path: Path, fake_llm: FakeLLM):
    workspace, data = tmp_path / "ws", tmp_path / "data"
    workspace.mkdir()
    (workspace / "a.txt").write_text("alpha\n")
    env = agent_env(fake_llm.base_url, fake_llm.api_key, AGENT_BUDGET_TASK="1000 tokens")
    fake_llm.script(reading(900, 200))
    result = _run(agent_argv("cli", workspace, data, "-p", "read a.txt"), env)
    assert result.returncode == 5, result.stderr
    assert "error: budget_reached: The task budget of 1,000 tokens is reached" in result.stderr
    assert result.stderr.count("budget of 1,000 tokens") == 1
    assert len(fake_llm.chat_requests) == 1

    fake_llm.script(reading(900, 200))
    result = _run(agent_argv("cli", workspace, data, "-p", "read a.txt", "--json"), env)
    done = [json.loads(line) for line in result.stdout.splitlines()][-1]
    assert result.returncode == 5 and done["reason"] == "budget"
    assert done["budget"] == budget_of("task", 1000, 1100)


def _run(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)


def test_money_budget_counts_what_priced_calls_cost(tmp_path: Path, fake_llm: FakeLLM):
    prices = {fake_llm.model: {"input": 10, "output": 10, "currency": "EUR"}}  # 1k tokens: €0.01
    env = {"AGENT_PRICES": json.dumps(prices), "AGENT_BUDGET_TASK": "0.015 EUR"}
    with serving(tmp_path, fake_llm, env, FILES) as server, connected(server.url) as client:
        fake_llm.script(reading(600, 100), reading(600, 100), reading(600, 100))
        cid = client.start("read it three times")
        done = finish(client, cid)
        assert done["reason"] == "budget" and len(fake_llm.chat_requests) == 3
        assert done["budget"]["used"]["amount"] == pytest.approx(0.021)
        assert done["budget"]["limit"] == {"amount": 0.015, "unit": "EUR"}
        message = errors(client, cid)[0]["message"]
        assert "The task budget of €0.0150 is reached: this task has used €0.0210" in message


def test_money_budget_on_a_model_without_a_price_stops_after_one_call(tmp_path: Path):
    with FakeLLM("llamacpp") as fake:
        env = {"AGENT_PROVIDER": "custom", "AGENT_MODEL": fake.model, "AGENT_BUDGET_DAY": "$1"}
        with serving(tmp_path, fake, env, FILES) as server, connected(server.url) as client:
            fake.script(reading(0, 0))
            cid = client.start("read it")
            done = finish(client, cid)
            assert done["reason"] == "budget" and done["budget"]["unpriced_calls"] == 1
            message = errors(client, cid)[0]["message"]
            assert "The day budget of $1.00 cannot be kept: a model call of this task" in message
            assert "had no known price" in message
            assert "AGENT_PRICES" in message and len(fake.chat_requests) == 1


@needs_tmux()
def test_cli_continue_raises_the_budget_that_stopped_it_once(tmp_path: Path, fake_llm: FakeLLM):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "a.txt").write_text("alpha\n")
    env = agent_env(fake_llm.base_url, fake_llm.api_key, AGENT_BUDGET_CONVERSATION="1000 tokens")
    argv = agent_argv("cli", workspace, tmp_path / "data")
    with Tmux(argv, env=env, cwd=tmp_path) as term:
        term.wait_for("/help for commands")
        fake_llm.script(reading(900, 200))
        term.type("read a.txt")
        term.wait_for(HINT)
        assert "The conversation budget of 1,000 tokens is reached" in term.screen()
        term.type("/continue --raise 500 tokens")
        term.wait_for("must be higher than the limit (1,000 tokens)")
        fake_llm.script(Reply("Read it all.", usage=(900, 200)))
        term.type("/continue --raise 5k tokens")
        term.wait_for("Read it all.")
        term.type("and again")
        term.wait_for(lambda screen: screen.count(HINT) == 2 and screen.rstrip().endswith("›"))
        term.keys("C-d")
        term.wait_for("[exit 0]")
    assert [m["content"] for m in fake_llm.chat_requests[-1].messages if m["role"] == "user"] == [
        "read a.txt",
        "continue",
    ]
    assert len(fake_llm.chat_requests) == 2
