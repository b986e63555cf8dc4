"""Condensing through the real loop: at the threshold mid-task, on request (`/compact` in the
terminal, `compact` on the socket), a failed summary call, and a restart after condensing."""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest

from core.services import build_services
from history.condensed_view import SUMMARY_HEADER, SUMMARY_SYSTEM
from protocol.records import MessageRecord
from tests.fake_llm import Call, ErrorReply, FakeLLM, Reply, long_answer
from tests.kit.clients import assert_contiguous, connected
from tests.kit.server import ServerProcess, agent_argv, agent_env
from tests.kit.settings import make_settings
from tests.kit.terminal import TerminalRecorder, ask
from tests.kit.waits import wait_until

LONG = "".join(f"w{n:03d} " for n in range(1200))[:6000]  # ~1,700 tokens, never repeating


def _terminal(fake: FakeLLM, tmp_path: Path, **overrides: Any) -> TerminalRecorder:
    settings = make_settings(
        fake,
        tmp_path,
        **{
            "model": fake.model,
            "mode": "thinking",
            "context_window": 20_000,
            "condense_threshold": 0.5,
            **overrides,
        },
    )
    return TerminalRecorder(build_services(settings))


def _earlier_tasks(terminal: TerminalRecorder, fake: FakeLLM, count: int = 2) -> None:
    for number in range(count):
        fake.script(Reply(reasoning="pondering", content=f"answer {number} " + LONG))
        assert ask(terminal, f"task {number} " + LONG) == "complete"


def _summary_records(terminal: TerminalRecorder) -> list[MessageRecord]:
    assert terminal.conversation is not None
    return [r for r in terminal.conversation.records if (r.get("meta") or {}).get("summary")]


@pytest.mark.parametrize("flavour", ["deepseek", "kimi"])
def test_the_threshold_condenses_mid_task_and_the_task_goes_on(tmp_path: Path, flavour: str):
    with FakeLLM(flavour) as fake:
        terminal = _terminal(fake, tmp_path)
        (tmp_path / "ws" / "big.txt").write_text("line of text\n" * 1400)
        _earlier_tasks(terminal, fake)
        fake.script(
            Reply(
                reasoning="I should read both",
                tool_calls=[Call("read_file", {"path": "big.txt"}), Call("list_files", {})],
            ),
            Reply(content="A summary: two tasks about words were answered."),
            Reply(content="big.txt has 1400 lines."),
        )
        assert ask(terminal, "how long is big.txt?") == "complete"

        assert all(r.status == 200 for r in fake.chat_requests)  # the strict fake took them all
        names = [(e.name, e.payload.get("phase")) for e in terminal.events]
        last_result = max(i for i, e in enumerate(names) if e == ("tool", "result"))
        condensing = names.index(("context", "condensing"))
        assert last_result < condensing < names.index(("context", "condensed"))
        condensed = terminal.named("context")[-1]
        assert condensed["trigger"] == "threshold"
        assert condensed["tokens_after"] < condensed["tokens_before"]

        summary_call, resumed = fake.chat_requests[-2], fake.chat_requests[-1]
        assert summary_call.messages[0]["content"] == SUMMARY_SYSTEM
        assert "tools" not in summary_call.body and "task 0" in summary_call.messages[1]["content"]
        sent = resumed.messages
        assert sent[1]["content"].startswith("task 0")  # the first message stays
        assert sent[2]["role"] == "user" and sent[2]["content"].startswith(SUMMARY_HEADER)
        assert sent[3]["content"] == "how long is big.txt?"  # the running task is kept whole
        assert sent[4]["reasoning_content"] == "I should read both"
        assert [m["role"] for m in sent[4:]] == ["assistant", "tool", "tool"]
        assert not any("answer 0" in str(m.get("content")) for m in sent)

        record = _summary_records(terminal)[0]
        assert record["role"] == "system" and record["seq"] == condensed["seq"]
        assert record["meta"]["summary"]["first_kept_id"] == condensed["first_kept_id"]
        assert terminal.context_usage.used_tokens < condensed["tokens_before"]


def test_a_failed_summary_leaves_the_context_and_the_task_goes_on(tmp_path: Path):
    with FakeLLM("deepseek") as fake:
        terminal = _terminal(fake, tmp_path, max_retries=0)
        (tmp_path / "ws" / "big.txt").write_text("line of text\n" * 1400)
        _earlier_tasks(terminal, fake)
        fake.script(
            Reply(tool_calls=[Call("read_file", {"path": "big.txt"})]),
            ErrorReply(500),
            Reply(tool_calls=[Call("list_files", {})]),
            Reply(content="Done anyway."),
        )
        assert ask(terminal, "read it") == "complete"
        phases = [p["phase"] for p in terminal.named("context")]
        assert phases == ["condensing", "failed"]  # tried once in this task, not at every call
        notice = terminal.named("notice")[-1]
        assert notice["code"] == "condense_failed" and "stays as it was" in notice["message"]
        assert _summary_records(terminal) == []
        for request in fake.chat_requests[-2:]:
            assert any(str(m["content"]).startswith("answer 0") for m in request.messages)
            assert not any(SUMMARY_HEADER in str(m["content"]) for m in request.messages)


def test_compact_on_request_and_after_a_restart_the_same_request(tmp_path: Path):
    # A window the tools' schemas leave room in: after the restart the context is estimated,
    # not the provider's count, and must not reach the threshold by itself (the process tools
    # made it, at 20,000); the compaction here is the user's.
    window = {"context_window": 40_000}
    with FakeLLM("deepseek") as fake:
        terminal = _terminal(fake, tmp_path, **window)
        _earlier_tasks(terminal, fake, count=3)
        fake.script(Reply(content="SUMMARY: three tasks; the user likes bananas."))
        cancel = terminal.begin_compaction("keep the word banana")
        assert cancel is not None
        assert terminal.run_compaction(cancel, "keep the word banana") == "condensed"
        assert "keep the word banana" in fake.chat_requests[-1].messages[1]["content"]
        summary = _summary_records(terminal)[0]
        assert summary["meta"]["summary"]["instructions"] == "keep the word banana"
        event = terminal.named("context")[-1]
        assert event["trigger"] == "user" and event["tokens_after"] < event["tokens_before"]

        fake.script(Reply(content="next answer"))
        ask(terminal, "what next?")
        before_restart = fake.chat_requests[-1].body

        restarted = _terminal(fake, tmp_path, **window)
        restarted.open_conversation(terminal.conversation_id or "")
        fake.script(Reply(content="next answer"))
        ask(restarted, "what next?", parent_id=summary["id"])  # the same place, again
        after_restart = fake.chat_requests[-1].body
        assert after_restart["messages"][1:] == before_restart["messages"][1:]
        assert after_restart["tools"] == before_restart["tools"]
        assert [m["role"] for m in after_restart["messages"]] == [
            "system",
            "user",
            "user",
            "user",
            "assistant",
            "user",
        ]


def test_compact_while_a_task_runs_waits_for_its_next_model_call(tmp_path: Path):
    with FakeLLM("deepseek") as fake:
        terminal = _terminal(fake, tmp_path, condense_threshold=0)
        _earlier_tasks(terminal, fake, count=3)
        fake.script(
            Reply(tool_calls=[Call("list_files", {})], delay=0.05, chunk_size=1),
            Reply(content="the summary"),
            Reply(content="finished"),
        )
        worker = threading.Thread(
            target=ask,
            args=(
                terminal,
                "go on",
            ),
            daemon=True,
        )
        worker.start()
        wait_until(lambda: terminal.running and terminal.named("tool"), 10, "the task's call")
        assert terminal.begin_compaction() is None  # scheduled
        worker.join(20)
        context = terminal.named("context")
        assert [c["phase"] for c in context] == ["condensing", "condensed"]
        assert context[0]["trigger"] == "user"
        assert terminal.named("done")[-1]["reason"] == "complete"
        assert fake.chat_requests[-1].messages[2]["content"].startswith(SUMMARY_HEADER)


# --- the terminal's /compact ----------------------------------------------------------------


def test_cli_compact_command(tmp_path: Path):
    workspace, data = tmp_path / "ws", tmp_path / "data"
    workspace.mkdir()
    with FakeLLM("deepseek") as fake:
        env = agent_env(fake.base_url, fake.api_key)
        fake.script(
            *(Reply(content=long_answer(word, 500)) for word in ("one", "two", "three")),
            Reply(content="They said one, two, three; kiwi."),
        )
        lines = [
            "/compact",
            "first",
            "second",
            "third",
            "/compact keep the word kiwi",
            "/compact",
            "/status",
        ]
        result = subprocess.run(
            agent_argv("cli", workspace, data),
            input="\n".join(lines) + "\n",
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert out.count("Nothing to condense yet") == 2  # before any task, and right after
    assert "condensing the context (" in out
    assert "context condensed: 3 earlier messages summarised" in out  # answer, user, answer
    assert "the older turns are summarised" in out
    assert "keep the word kiwi" in fake.chat_requests[3].messages[1]["content"]
    conversation = next((data / "conversations").iterdir())
    assert '"summary":{"first_kept_id"' in (conversation / "messages.jsonl").read_text()


# --- the socket's compact, against the real server ---------------------------------------------


def test_socket_compact_then_a_restart_gives_the_same_view(fake: FakeLLM, tmp_path: Path):
    workspace, data = tmp_path / "ws", tmp_path / "data"
    workspace.mkdir()
    server = ServerProcess(workspace, data, base_url=fake.base_url, api_key=fake.api_key)
    with server, connected(server.url) as client:
        cid: str | None = None
        for number in range(3):
            fake.script(Reply(content=f"answer {number} " + long_answer("and so on", 300)))
            cid = client.start(f"question {number}", cid)
            client.wait_done(cid, count=number + 1)
        assert cid is not None
        fake.script(Reply(content="They asked three questions; pears matter."))
        ack = client.call("compact", {"conversation_id": cid, "instructions": "mention pears"})
        assert ack == {"ok": True, "scheduled": False}
        client.wait_until(
            lambda evs: any(e.name == "context" and e.payload["phase"] == "condensed" for e in evs),
            what="condensed",
        )
        events = client.of(cid)
        assert_contiguous(events)
        context = [e.payload for e in events if e.name == "context"]
        assert [c["phase"] for c in context] == ["condensing", "condensed"]
        assert context[1]["tokens_after"] < context[1]["tokens_before"]
        assert context[1]["summary"] == "They asked three questions; pears matter."
        assert "mention pears" in fake.chat_requests[-1].messages[1]["content"]

        again = client.call("compact", {"conversation_id": cid})
        assert again["ok"] is False and again["error"]["code"] == "invalid"
        view = client.call("get_conversation", {"conversation_id": cid})
        summary = view["messages"][-1]
        assert summary["role"] == "system" and summary["meta"]["summary"]["first_kept_id"]
        assert summary["seq"] == context[1]["seq"] == view["seq"]

    restarted = ServerProcess(workspace, data, base_url=fake.base_url, api_key=fake.api_key)
    with restarted, connected(restarted.url) as client:
        reloaded = client.call("get_conversation", {"conversation_id": cid})
        assert reloaded["messages"] == view["messages"] and reloaded["seq"] == view["seq"]
        fake.script(Reply(content="answer 3"))
        client.start("question 3", cid)
        client.wait_done(cid)
    sent = fake.chat_requests[-1].messages
    assert [m["content"] for m in sent[1:2] + sent[3:]] == [
        "question 0",
        "question 2",
        "answer 2 " + long_answer("and so on", 300),
        "question 3",
    ]
    assert sent[2]["content"] == f"{SUMMARY_HEADER}\n\nThey asked three questions; pears matter."
