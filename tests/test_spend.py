"""What tasks cost, through `main.py cli -p` against the fake model: the built-in price with
cached tokens, a price set by AGENT_PRICES, an unknown one, and the day's ledger."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from core.spend import today_totals
from tests.fake_llm import FakeLLM, Reply
from tests.kit.server import agent_argv, agent_env


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    workspace, data = tmp_path / "ws", tmp_path / "data"
    workspace.mkdir()
    return workspace, data


def run(fake_llm: FakeLLM, dirs: tuple[Path, Path], *extra: str, **env: str) -> Any:
    return subprocess.run(
        agent_argv("cli", *dirs, "-p", "hi", *extra),
        env=agent_env(fake_llm.base_url, fake_llm.api_key, **env),
        cwd=dirs[0].parent,
        capture_output=True,
        text=True,
        timeout=60,
    )


def done_of(stdout: str) -> dict[str, Any]:
    evs = [json.loads(line) for line in stdout.splitlines() if line.strip()]
    assert evs[-1]["event"] == "done"
    return evs[-1]


def test_cached_tokens_priced_at_the_cached_rate(fake_llm: FakeLLM, dirs: tuple[Path, Path]):
    # deepseek-v4-flash: 0.14 input, 0.0028 cached input, 0.28 output USD per million
    fake_llm.script(Reply(content="hello", usage=(1_000_000, 100_000), cached_tokens=400_000))
    result = run(fake_llm, dirs, "--json")
    assert result.returncode == 0, result.stderr
    usage = done_of(result.stdout)["usage"]
    assert usage["cached_prompt_tokens"] == 400_000
    assert usage["cost"]["currency"] == "USD"
    assert usage["cost"]["amount"] == pytest.approx(0.084 + 0.00112 + 0.028)
    conversation = done_of(result.stdout)["conversation_id"]
    meta = json.loads((dirs[1] / "conversations" / conversation / "meta.json").read_text())
    (end,) = meta["meta"]["task_ends"].values()
    assert end["usage"]["cost"] == usage["cost"]


def test_a_set_price_and_the_end_line(fake_llm: FakeLLM, dirs: tuple[Path, Path]):
    prices = {"deepseek-v4-flash": {"input": 1, "output": 10, "currency": "EUR"}}
    fake_llm.script(Reply(content="hello", usage=(2_000, 300)))
    result = run(fake_llm, dirs, AGENT_PRICES=json.dumps(prices))
    assert result.returncode == 0, result.stderr
    assert "2,000 in · 300 out · €0.0050" in result.stderr


def test_a_local_model_is_price_unknown_and_estimated(fake_llm: FakeLLM, dirs: tuple[Path, Path]):
    local = {"AGENT_PROVIDER": "custom", "AGENT_MODEL": "smollm2-135m-instruct"}
    with FakeLLM("llamacpp") as llama:  # llama-cpp-python's server: no usage sent
        llama.script(Reply(content="hello"), Reply(content="hello"))
        result = run(llama, dirs, "--json", **local)
        assert result.returncode == 0, result.stderr
        usage = done_of(result.stdout)["usage"]
        assert usage["cost"] is None and usage["estimated"] is True
        result = run(llama, dirs, **local)
    assert "out · price unknown" in result.stderr and "~" in result.stderr
    assert "$0" not in result.stderr
    fake_llm.script(Reply(content="hello", usage=(1_000, 50)))
    assert run(fake_llm, dirs).returncode == 0
    today = today_totals(dirs[1])
    assert today.usage.prompt_tokens > 1_000 and today.usage.estimated
    assert today.unpriced_calls == 2 and today.cost is None
    assert today.costs["USD"] == pytest.approx((1_000 * 0.14 + 50 * 0.28) / 1_000_000)


def test_a_task_stopped_before_any_call_costs_nothing(fake_llm: FakeLLM, dirs: tuple[Path, Path]):
    env = {"AGENT_BUDGET_DAY": "100 tokens"}
    fake_llm.script(Reply(content="hello", usage=(1_000, 50)))
    assert run(fake_llm, dirs, **env).returncode == 0  # the day's budget is now used up
    stopped = run(fake_llm, dirs, "--json", **env)
    assert stopped.returncode == 5, stopped.stderr
    usage = done_of(stopped.stdout)["usage"]
    assert usage["prompt_tokens"] == usage["completion_tokens"] == 0
    assert usage["cost"] == {"amount": 0, "currency": "USD"}  # no call: exactly nothing
    stopped = run(fake_llm, dirs, **env)
    assert stopped.returncode == 5 and "0 in · 0 out\n" in stopped.stderr
    assert "price unknown" not in stopped.stderr and "$" not in stopped.stderr
    assert len(fake_llm.chat_requests) == 1
