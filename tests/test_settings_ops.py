"""The user's settings changed while the server runs (issue 37, point 7): `get_settings` and
`set_settings` through the real server, its settings file and the fake model: a key and a model
set on a server started without a key answer the next message with no restart; the file is
0600 and the only place the key is; values this run's environment fixes, or bad ones, are
refused per setting and nothing is written."""

from __future__ import annotations

import json
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fake_llm import Call, FakeLLM, Reply
from tests.kit.clients import connected
from tests.kit.server import ServerProcess, without_settings
from tests.kit.settings import TOKEN
from workspace_client import Client, WorkspaceError

OTHER_MODEL = "deepseek-v4-pro"  # the fake's second deepseek model: not the preset's default


@pytest.fixture
def keyless(fake_llm: FakeLLM, tmp_path: Path) -> Iterator[ServerProcess]:
    """A server on the fake model (provider and URL from its environment) with no key, and
    neither mode nor approval set for the run."""
    server = without_settings(
        ServerProcess.in_folder(tmp_path, fake_llm), "api_key", "mode", "approval"
    )
    with server.start():
        yield server


def settings_file(server: ServerProcess) -> Path:
    return server.data_dir / "settings.json"


def test_a_key_and_a_model_set_while_it_runs_answer_the_next_message(
    keyless: ServerProcess, fake_llm: FakeLLM
) -> None:
    with connected(keyless.url) as client:
        assert client.call("get_status")["api"]["configured"] is False
        shown = client.call("get_settings")
        assert shown["settings"]["api_key"] == {
            "set": False,
            "source": "default",
            "fixed": False,
            "variable": "AGENT_API_KEY",
        }
        assert shown["settings"]["provider"]["source"] == "environment"
        assert shown["settings"]["provider"]["fixed"] is True
        assert shown["settings"]["model"] == {
            "value": None,
            "source": "default",
            "fixed": False,
            "variable": "AGENT_MODEL",
        }
        ack = client.call(
            "set_settings", {"settings": {"api_key": fake_llm.api_key, "model": OTHER_MODEL}}
        )
        assert ack["ok"], ack
        assert fake_llm.api_key not in json.dumps(ack)
        assert (
            ack["settings"]["api_key"]["set"]
            and ack["settings"]["api_key"]["source"] == "settings file"
        )
        assert ack["settings"]["model"]["value"] == OTHER_MODEL
        assert ack["api"]["configured"] is True
        assert fake_llm.api_key not in json.dumps(client.call("get_settings"))

        fake_llm.script(Reply(content="Answered with the key from the panel."))
        cid = client.start("hello")
        events = client.wait_done(cid)
    assert [e.payload["reason"] for e in events if e.name == "done"] == ["complete"]
    request = fake_llm.chat_requests[-1]
    assert request.headers["authorization"] == f"Bearer {fake_llm.api_key}"
    assert request.body["model"] == OTHER_MODEL
    path = settings_file(keyless)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert json.loads(path.read_text()) == {"api_key": fake_llm.api_key, "model": OTHER_MODEL}


def test_the_settings_file_is_read_at_the_next_start(
    keyless: ServerProcess, fake_llm: FakeLLM
) -> None:
    with Client(keyless.url, TOKEN) as client:
        client.set_settings(api_key=fake_llm.api_key, mode="thinking", budget_task="$0.50")
    keyless.restart()
    with Client(keyless.url, TOKEN) as client:
        shown = client.settings()["settings"]
        status = client.status()
    assert shown["mode"] == {
        "value": "thinking",
        "source": "settings file",
        "fixed": False,
        "variable": "AGENT_MODE",
    }
    assert shown["budget_task"]["value"] == "$0.50"
    assert shown["api_key"]["set"] is True
    assert status["api"]["configured"] is True and status["mode"] == "thinking"


def test_values_this_run_fixes_and_bad_values_are_refused_by_name(
    keyless: ServerProcess, fake_llm: FakeLLM
) -> None:
    with connected(keyless.url) as client:
        fixed = client.call("set_settings", {"settings": {"provider": "openai", "model": "x"}})
        assert fixed["ok"] is False and fixed["error"]["code"] == "invalid"
        assert set(fixed["error"]["fields"]) == {"provider"}
        assert "AGENT_PROVIDER in the environment" in fixed["error"]["fields"]["provider"]

        bad = client.call(
            "set_settings",
            {
                "settings": {
                    "mode": "fastest",
                    "budget_task": "lots",
                    "prices": {"m": {"input": -1, "output": 1}},
                }
            },
        )
        assert bad["ok"] is False and bad["error"]["code"] == "invalid"
        fields = bad["error"]["fields"]
        assert set(fields) == {"mode", "budget_task", "prices"}, fields
        assert "'fast' or 'thinking'" in fields["mode"]
        assert "greater than or equal to 0" in fields["prices"] and "m.input" in fields["prices"]

        unknown = client.call("set_settings", {"settings": {"web_token": "x" * 20}})
        assert unknown["error"]["fields"] == {"web_token": "not a setting that can be changed here"}
        assert client.call("set_settings", {"settings": {}})["error"]["code"] == "bad_request"
        assert client.call("get_settings")["settings"]["model"]["source"] == "default"
    assert not settings_file(keyless).exists()


def test_a_key_the_environment_gives_is_fixed_and_never_sent(
    fake_llm: FakeLLM, tmp_path: Path
) -> None:
    server = ServerProcess.in_folder(tmp_path, fake_llm)
    with server.start(), Client(server.url, TOKEN) as client:
        key = client.settings()["settings"]["api_key"]
        with pytest.raises(WorkspaceError) as refused:
            client.set_settings(api_key="sk-other")
    assert key == {"set": True, "source": "environment", "fixed": True, "variable": "AGENT_API_KEY"}
    assert refused.value.code == "invalid" and "AGENT_API_KEY" in str(refused.value)
    assert not (server.data_dir / "settings.json").exists()


def test_a_running_task_keeps_the_model_it_started_with(
    keyless: ServerProcess, fake_llm: FakeLLM
) -> None:
    """The model changes while the task waits for an approval: its next call keeps the model
    it started with; the next task takes the new one."""
    with connected(keyless.url) as client:
        assert client.call("set_settings", {"settings": {"api_key": fake_llm.api_key}})["ok"]
        fake_llm.script(
            Reply(tool_calls=[Call("delete_file", {"path": "notes.txt"})]),
            Reply(content="First task done."),
            Reply(content="Second task done."),
        )
        cid = client.start("delete notes.txt", approval="ask")
        asked = client.wait_for("tool", timeout=20, phase="approval")
        assert client.call("set_settings", {"settings": {"model": OTHER_MODEL}})["ok"]
        answer = {"conversation_id": cid, "call_id": asked["call_id"], "approved": False}
        assert client.call("approve", answer)["ok"]
        client.wait_done(cid)
        client.start("again", cid)
        client.wait_done(cid, count=2)
    models = [request.body["model"] for request in fake_llm.chat_requests]
    assert models == [fake_llm.model, fake_llm.model, OTHER_MODEL]


def test_a_command_can_neither_read_nor_write_the_settings_file(
    fake_llm: FakeLLM, tmp_path: Path
) -> None:
    """The file lives in the data folder, out of the sandbox's sight: the key it holds and the
    limits it sets are the user's, never the agent's."""
    server = ServerProcess.in_folder(tmp_path, fake_llm, env={"AGENT_SANDBOX": "local"})
    with without_settings(server, "api_key").start(), connected(server.url) as client:
        if client.call("get_status")["sandbox"]["kind"] != "bubblewrap":
            pytest.skip("bubblewrap is not usable here: commands are not confined")
        saved = {"settings": {"api_key": fake_llm.api_key, "budget_task": "$0.50"}}
        assert client.call("set_settings", saved)["ok"]
        path = settings_file(server)
        before = path.read_text()
        command = f"cat {path}; echo '{{}}' > {path} && echo WROTE; true"
        fake_llm.script(
            Reply(tool_calls=[Call("run_command", {"command": command})]), Reply(content="ok")
        )
        cid = client.start("run it", approval="auto")
        events = client.wait_done(cid, 60)
    result = next(
        e.payload for e in events if e.name == "tool" and e.payload.get("phase") == "result"
    )
    assert "WROTE" not in result["output"] and fake_llm.api_key not in result["output"]
    assert path.read_text() == before
