"""MainTerminal's loop against the fake model server, events collected in a list."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel

import history.conversation as conversation_module
from modules.tools.tool_context import ToolContext
from tests.fake_llm import Call, ErrorReply, Reply, long_answer
from tests.kit.terminal import ask, make_terminal, run_in_thread
from tests.kit.waits import wait_until
from utils.files import atomic_write


class HangArgs(BaseModel):
    pass


def hang(ctx: ToolContext, args: HangArgs) -> str:
    """Never return (a tool stuck in the kernel, say)."""
    threading.Event().wait()
    return "unreachable"


def test_thinking_mode_thinks_first_and_resends_reasoning_with_tool_calls(fake_llm, tmp_path):
    terminal = make_terminal(fake_llm, tmp_path, mode="thinking")
    fake_llm.script(
        Reply(reasoning="I should look at the files first.", tool_calls=[Call("list_files", {})]),
        Reply(content="The workspace is empty."),
    )
    assert ask(terminal, "what is here?") == "complete"
    first, second = fake_llm.chat_requests
    assert first.body["thinking"] == {"type": "enabled"}
    assert second.body["thinking"] == {"type": "disabled"}
    resent = next(m for m in second.messages if m["role"] == "assistant")
    assert resent["reasoning_content"] == "I should look at the files first."
    thought = "".join(p["text"] for p in terminal.named("thinking"))
    assert thought == "I should look at the files first."
    seqs = [e.payload["seq"] for e in terminal.events]
    assert seqs == list(range(1, len(seqs) + 1))


def test_malformed_arguments_and_unknown_tools_reach_the_model(fake_llm, tmp_path):
    terminal = make_terminal(fake_llm, tmp_path)
    fake_llm.script(
        Reply(
            tool_calls=[
                Call("create_file", raw='{"path": "a.txt", "content": '),
                Call("summon_dragon", {"size": "large"}),
            ]
        ),
        Reply(content="Sorry, retrying is pointless."),
    )
    assert ask(terminal, "go") == "complete"
    results = [p for p in terminal.named("tool") if p["phase"] == "result"]
    assert [r["ok"] for r in results] == [False, False]
    assert "not valid JSON" in results[0]["output"]
    assert "Unknown tool" in results[1]["output"] and "create_file" in results[1]["output"]
    tool_messages = [m for m in fake_llm.chat_requests[1].messages if m["role"] == "tool"]
    assert [m["content"] for m in tool_messages] == [r["output"] for r in results]
    assert not (tmp_path / "ws" / "a.txt").exists()


def test_cancel_stops_the_stream_at_once_and_keeps_the_partial_answer(fake_llm, tmp_path):
    terminal = make_terminal(fake_llm, tmp_path)
    fake_llm.script(Reply(content=long_answer("word", 400), chunk_size=5, delay=0.02))
    thread = run_in_thread(terminal, "talk slowly")
    terminal.wait_for("token")
    started = time.monotonic()
    assert terminal.cancel()
    thread.join(5)
    assert not thread.is_alive() and time.monotonic() - started < 1.0
    assert terminal.named("done")[-1]["reason"] == "cancelled"
    assert terminal.conversation_id is not None
    last = terminal.services.store.get(terminal.conversation_id).records[-1]
    assert last["role"] == "assistant" and last["meta"]["interrupted"] == "cancelled"
    assert last["content"].startswith("word")


def test_ask_mode_waits_for_approval_and_reports_a_rejection(fake_llm, tmp_path):
    terminal = make_terminal(fake_llm, tmp_path, approval="ask")
    fake_llm.script(
        Reply(
            tool_calls=[
                Call("run_command", {"command": "echo approved > yes.txt"}),
                Call("delete_file", {"path": "yes.txt"}),
            ]
        ),
        Reply(content="ok"),
    )
    thread = run_in_thread(terminal, "do things")
    first = terminal.wait_for("tool", phase="approval", name="run_command")
    assert first["preview"] == "echo approved > yes.txt"
    assert terminal.approve(first["call_id"], True)
    second = terminal.wait_for("tool", phase="approval", name="delete_file")
    assert not terminal.approve("no-such-call", True)
    assert terminal.approve(second["call_id"], False)
    thread.join(10)
    assert (tmp_path / "ws" / "yes.txt").read_text() == "approved\n"
    declined = [m for m in fake_llm.chat_requests[1].messages if m["role"] == "tool"][1]
    assert "declined" in declined["content"]


def test_cancel_while_waiting_for_approval(fake_llm, tmp_path):
    terminal = make_terminal(fake_llm, tmp_path, approval="ask")
    fake_llm.script(Reply(tool_calls=[Call("run_command", {"command": "true"})]))
    thread = run_in_thread(terminal, "do it")
    terminal.wait_for("tool", phase="approval")
    terminal.cancel()
    thread.join(5)
    assert terminal.named("done")[-1]["reason"] == "cancelled"
    assert terminal.conversation_id is not None
    records = terminal.services.store.get(terminal.conversation_id).records
    assert records[-1]["role"] == "tool" and "Cancelled" in records[-1]["content"]


def test_read_only_offers_only_reading_tools(fake_llm, tmp_path):
    terminal = make_terminal(fake_llm, tmp_path, approval="read-only")
    fake_llm.script(Reply(tool_calls=[Call("create_file", {"path": "x.txt"})]), Reply(content="ok"))
    ask(terminal, "write")
    offered = {t["function"]["name"] for t in fake_llm.chat_requests[0].body["tools"]}
    assert "read_file" in offered and "create_file" not in offered
    assert "run_command" not in offered
    assert not (tmp_path / "ws" / "x.txt").exists()


def test_focus_files_reach_every_call_and_follow_renames(fake_llm, tmp_path):
    terminal = make_terminal(fake_llm, tmp_path)
    (tmp_path / "ws").mkdir(exist_ok=True)
    (tmp_path / "ws" / "plan.md").write_text("SECRET-PLAN-CONTENT")
    fake_llm.script(
        Reply(tool_calls=[Call("focus_file", {"path": "plan.md"})]),
        Reply(tool_calls=[Call("rename_file", {"old_path": "plan.md", "new_path": "p2.md"})]),
        Reply(content="done"),
    )
    ask(terminal, "focus")
    assert "SECRET-PLAN-CONTENT" in fake_llm.chat_requests[1].messages[0]["content"]
    assert "p2.md" in fake_llm.chat_requests[2].messages[0]["content"]
    assert terminal.focus.paths() == ["p2.md"]
    assert terminal.conversation_id is not None
    stored = terminal.services.store.get(terminal.conversation_id).meta["meta"]
    assert stored["focus"] == ["p2.md"]


def test_logs_are_structured_and_redacted_on_request(fake_llm, tmp_path):
    terminal = make_terminal(fake_llm, tmp_path, log_redact_content=True)
    prompt = "p" * 100 + " my private prompt"
    fake_llm.script(Reply(content="a private reply " * 10, usage=(321, 45)))
    ask(terminal, prompt)
    logs = tmp_path / "data" / "logs"
    records = [json.loads(x) for x in (logs / "agent.jsonl").read_text().splitlines()]
    started = next(r for r in records if r["message"] == "task started")
    assert started["prompt"]["head"] == prompt[:64] and len(started["prompt"]["sha256"]) == 64
    assert started["conversation_id"] == terminal.conversation_id and started["trace_id"]
    assert "my private prompt" not in (logs / "agent.jsonl").read_text()
    call = next(r for r in records if r["message"] == "model call ok")
    assert call["prompt_tokens"] == 321 and call["message_id"]
    assert call["completion_tokens"] == 45 and "latency_ms" in call and call["model"]
    wait_until(  # the stream log is flushed every 0.2 s
        lambda: len((logs / "debug_stream.log").read_text().splitlines()) >= 5,
        2,
        "the raw deltas to reach debug_stream.log",
        every=0.05,
    )
    assert "a private reply" not in (logs / "debug_stream.log").read_text()


def test_editing_the_first_message_branches_from_the_root(fake_llm, tmp_path):
    terminal = make_terminal(fake_llm, tmp_path)
    fake_llm.script(Reply(content="first answer"), Reply(content="second answer"))
    ask(terminal, "one")
    ask(terminal, "one, reworded", parent_id=None)
    assert terminal.conversation_id is not None
    records = terminal.services.store.get(terminal.conversation_id).records
    roots = [r for r in records if r["parent_id"] is None]
    assert [(r["content"], r["version"]) for r in roots] == [("one", 1), ("one, reworded", 2)]
    sent = fake_llm.chat_requests[1].messages
    assert [m["role"] for m in sent] == ["system", "user"]
    assert sent[1]["content"] == "one, reworded"


def test_a_proposed_edit_reaches_the_fronts_with_its_id_and_diff(fake_llm, tmp_path):
    terminal = make_terminal(fake_llm, tmp_path)
    (tmp_path / "ws" / "app.py").write_text("print('old')\n")
    fake_llm.script(
        Reply(
            tool_calls=[Call("propose_edit", {"path": "app.py", "new_content": "print('new')\n"})]
        ),
        Reply(content="Review it, please."),
    )
    ask(terminal, "improve app.py")
    result = terminal.wait_for("tool", phase="result", name="propose_edit")
    proposal = result["details"]["proposal"]
    assert proposal["path"] == "app.py" and "+print('new')" in proposal["diff"]
    assert (tmp_path / "ws" / "app.py").read_text() == "print('old')\n"
    assert terminal.conversation_id is not None
    record = terminal.services.store.get(terminal.conversation_id).records[-2]
    assert record["role"] == "tool" and record["meta"]["proposal"]["id"] == proposal["id"]
    terminal.services.proposals.apply_proposal(proposal["id"])
    assert (tmp_path / "ws" / "app.py").read_text() == "print('new')\n"


def test_a_retry_is_told_before_the_wait(fake_llm, tmp_path):
    terminal = make_terminal(fake_llm, tmp_path)
    fake_llm.script(ErrorReply(503, "overloaded"), Reply(content="fine now"))
    assert ask(terminal, "hello") == "complete"
    [notice] = terminal.named("notice")
    assert notice["code"] == "retrying" and "overloaded" in notice["message"]
    assert notice["seconds"] >= 0 and "attempt 2 of" in notice["message"]
    names = [e.name for e in terminal.events]
    assert names.index("notice") < names.index("token")


def test_a_tool_past_its_limit_is_abandoned_and_the_task_goes_on(fake_llm, tmp_path):
    terminal = make_terminal(fake_llm, tmp_path, tool_timeout=0.5)
    terminal.services.tools.register("hang", hang, read_only=True)
    fake_llm.script(Reply(tool_calls=[Call("hang", {})]), Reply(content="moved on"))
    assert ask(terminal, "wait for it") == "complete"
    result = terminal.wait_for("tool", phase="result", name="hang")
    assert result["ok"] is False and "abandoned" in result["output"]
    assert "moved on" in "".join(t["text"] for t in terminal.named("token"))


def test_cancel_ends_the_task_even_when_a_tool_never_returns(fake_llm, tmp_path):
    terminal = make_terminal(fake_llm, tmp_path)
    terminal.services.tools.register("hang", hang, read_only=True)
    fake_llm.script(Reply(tool_calls=[Call("hang", {})]))
    thread = run_in_thread(terminal, "wait for ever")
    terminal.wait_for("tool", phase="end", name="hang")
    assert terminal.cancel()
    thread.join(5)
    assert not thread.is_alive()
    assert terminal.wait_for("done")["reason"] == "cancelled"
    assert not terminal.running


def test_a_new_conversations_meta_is_whole_from_its_first_write(fake_llm, tmp_path, monkeypatch):
    """The path to a send_message ack writes meta.json once (under load every system call
    there costs a turn at the GIL), with the title and the choices already in it."""
    terminal = make_terminal(fake_llm, tmp_path, mode="thinking")
    writes: list[Path] = []

    def counted(path: Path, data: str | bytes, **options: Any) -> os.stat_result:
        writes.append(path)
        return atomic_write(path, data, **options)

    monkeypatch.setattr(conversation_module, "atomic_write", counted)
    task = terminal.begin_task("Please fix the parser in src/parse.py")
    assert [path.name for path in writes] == ["meta.json"]
    meta_file = tmp_path / "data" / "conversations" / task.conversation.id / "meta.json"
    first = meta_file.stat()
    meta = json.loads(meta_file.read_text())
    assert meta["title"] == "Fix the parser in src/parse.py"
    assert {k: meta["meta"][k] for k in ("agent", "mode", "approval")} == {
        "agent": "general",
        "mode": "thinking",
        "approval": "auto",
    }
    assert [r["role"] for r in task.conversation.records] == ["user"]
    fake_llm.script(Reply(content="Fixed."))
    assert terminal.run_task(task) == "complete"
    after = json.loads(meta_file.read_text())
    assert meta_file.stat().st_ino != first.st_ino  # written again at the end
    assert after["meta"]["last_seq"] == terminal.last_seq
    assert after["updated_at"] > meta["updated_at"]
