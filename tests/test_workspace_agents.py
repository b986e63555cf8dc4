"""Agent files and skills in the workspace are the agent's to write: through the real server on
the fake model, a planted file never stops the start, never loosens the user's limits, never
reads through a link out of the workspace, and an over-large budget is refused as such."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from tests.fake_llm import Call, FakeLLM, Reply
from tests.kit.clients import EventClient, connected
from tests.kit.server import ServerProcess, serving

# The module's shared server (the budget override tests): refusals that keep nothing.
pytestmark = [pytest.mark.e2e, pytest.mark.server(env={"AGENT_BUDGET_TASK": "1k tokens"})]

MEMORY_BOUND_MB = 300  # the server's peak with every bad file below (87 MB here), not 1 GB more
START_BOUND_S = 25  # 5 s here on a loaded machine; the 10**9 template alone took 21 s more


def agent_file(name: str, **fields: Any) -> str:
    return json.dumps({"name": name, "description": f"The {name} agent.", **fields})


def status(client: EventClient) -> dict[str, Any]:
    answer = client.call("get_status", {})
    assert answer["ok"], answer
    return dict(answer)


def problems(answer: dict[str, Any]) -> dict[str, str]:
    return {Path(p["path"]).name: p["message"] for p in answer["agent_problems"]}


def peak_memory_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM in /proc/PID/status")


def reading(prompt: int, completion: int) -> Reply:
    return Reply(tool_calls=[Call("read_file", {"path": "a.txt"})], usage=(prompt, completion))


def test_bad_agent_files_are_listed_and_the_server_starts_and_serves(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    files = {
        "a.txt": "alpha\n",
        ".agents/agents/zz.yaml": "name: zz\ndescription: d\nbudget: .inf\n",
        ".agents/agents/big.json": agent_file("big", system_prompt="{{ 'a' * 10**9 }}"),
        ".agents/agents/late.json": agent_file(  # explodes only when `now` is real
            "late", system_prompt="{% if now != 'now' %}{{ 'x'.ljust(10**9) }}{% endif %}"
        ),
        ".agents/agents/bomb.yaml": "a: &a [x, x, x, x, x, x, x, x, x]\n"
        + "".join(
            f"{c}: &{c} [{', '.join(['*' + p] * 9)}]\n"
            for p, c in zip("abcdefgh", "bcdefghi", strict=True)
        )
        + "name: bomb\ndescription: *i\n",
        ".agents/agents/fine.yaml": "name: fine\ndescription: d\nsystem_prompt: In {{ now }}.\n",
    }
    started = time.monotonic()
    with serving(tmp_path, fake_llm, {}, files) as server, connected(server.url) as client:
        assert time.monotonic() - started < START_BOUND_S
        assert server.pid is not None and peak_memory_mb(server.pid) < MEMORY_BOUND_MB
        answer = status(client)
        said = problems(answer)
        assert "over the largest budget" in said["zz.yaml"]
        assert "does not render" in said["big.json"] and "not arithmetic" in said["big.json"]
        assert "does not render" in said["late.json"] and "not a call" in said["late.json"]
        assert "values once its aliases are expanded" in said["bomb.yaml"]
        assert {a["name"] for a in answer["agents"]} >= {"general", "fine"}

        fake_llm.script(Reply("fine here"))
        cid = client.start("hello", agent="fine")
        assert client.wait_done(cid)[-1].payload["reason"] == "complete"
        assert fake_llm.chat_requests[-1].messages[0]["content"].startswith("In 20")


def test_a_planted_budget_does_not_outlive_a_restart_unless_the_workspace_is_trusted(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    """A task's command plants general.yaml with a budget of its own; the next start keeps the
    user's AGENT_BUDGET_TASK, unless they trust the workspace's agents."""
    budget = {"AGENT_BUDGET_TASK": "1k tokens"}
    files = {"a.txt": "alpha\n"}
    with serving(tmp_path, fake_llm, budget, files) as server:
        planted = server.workspace / ".agents" / "agents" / "general.yaml"
        planted.parent.mkdir(parents=True)
        planted.write_text("name: general\ndescription: Planted.\nbudget: 1m tokens\n")
        server.restart()
        with connected(server.url) as client:
            said = problems(status(client))["general.yaml"]
            assert "budget 1,000,000 tokens, over the 1,000 tokens of the general agent" in said
            fake_llm.script(reading(600, 100), reading(600, 100))
            cid = client.start("read a.txt again and again")
            done = client.wait_done(cid)[-1].payload
            assert done["reason"] == "budget" and done["budget"]["limit"]["amount"] == 1000
            assert len(fake_llm.chat_requests) == 2

        server.env["AGENT_TRUST_WORKSPACE_AGENTS"] = "true"
        server.restart()
        with connected(server.url) as client:
            assert status(client)["agent_problems"] == []
            fake_llm.script(reading(600, 100), reading(600, 100), Reply("read it twice"))
            cid = client.start("read a.txt again and again")
            assert client.wait_done(cid)[-1].payload["reason"] == "complete"
            assert len(fake_llm.chat_requests) == 2 + 3


def test_links_out_of_the_workspace_are_not_loaded_and_say_why(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    outside = tmp_path / "outside"
    (outside / "skills" / "leak").mkdir(parents=True)
    (outside / "skills" / "leak" / "SKILL.md").write_text(
        "---\nname: leak\ndescription: From outside.\n---\nOUTSIDE-BODY-7\n"
    )
    (outside / "out.yaml").write_text(agent_file("out"))
    workspace = tmp_path / "ws"
    (workspace / ".agents" / "agents").mkdir(parents=True)
    (workspace / ".agents" / "agents" / "link.yaml").symlink_to(outside / "out.yaml")
    (workspace / ".agents" / "skills").symlink_to(outside / "skills")
    server = ServerProcess(
        workspace, tmp_path / "data", base_url=fake_llm.base_url, api_key=fake_llm.api_key
    )
    with server, connected(server.url) as client:
        answer = status(client)
        assert "link.yaml leads out of the workspace" in problems(answer)["link.yaml"]
        assert "out" not in {a["name"] for a in answer["agents"]}
        [broken] = [s for s in answer["skills"] if "broken" in s]
        assert broken["name"] == "skills" and "leads out of the workspace" in broken["broken"]
        assert "leak" not in {s["name"] for s in answer["skills"]}
        ack = client.call("send_message", {"conversation_id": None, "text": "x", "skill": "leak"})
        assert ack["ok"] is False and ack["error"]["code"] == "not_found"
        fake_llm.script(Reply(tool_calls=[Call("use_skill", {"name": "leak"})]), Reply("no"))
        cid = client.start("use the leak skill")
        client.wait_done(cid)
        assert "OUTSIDE-BODY-7" not in json.dumps([r.body for r in fake_llm.chat_requests])


@pytest.mark.parametrize(
    ("limit", "code"),
    [
        ({"amount": float("inf"), "unit": "tokens"}, "invalid"),  # JSON's 1e400
        ("9" * 400 + " tokens", "invalid"),
        ({"amount": 1e300, "unit": "USD"}, "invalid"),
        ("1e999 tokens", "bad_request"),
        ({"amount": float("nan"), "unit": "tokens"}, "bad_request"),
    ],
    ids=["inf", "long-text", "1e300-USD", "exponent-text", "nan"],
)
def test_an_over_large_budget_override_is_refused_not_a_crash(
    client: EventClient, limit: Any, code: str
) -> None:
    override = {"scope": "task", "limit": limit}
    ack = client.call(
        "send_message", {"conversation_id": None, "text": "go", "budget_override": override}
    )
    assert ack["ok"] is False and ack["error"]["code"] == code, ack
    if code == "invalid":
        assert "over the largest budget" in ack["error"]["message"]
    assert client.call("list_conversations", {})["conversations"] == []  # nothing kept
