"""Managing conversations over Socket.IO: titles, rename, delete, search, what each keeps
(mode, approval, focus, how its tasks ended), undo previews, memory, and the running dot."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cli.session import run_command
from cli.terminal import CliTerminal
from core.services import build_services
from tests.fake_llm import Call, FakeLLM, Reply, long_answer
from tests.kit.clients import InProcessClient, Web
from tests.kit.events import payloads
from tests.kit.settings import make_settings
from tests.kit.terminal import ask


def updates(client: InProcessClient, cid: str) -> list[dict[str, Any]]:
    return client.named("conversation_update", id=cid)


def test_titles_rename_search_and_delete(web: Web, fake_llm: FakeLLM):
    fake_llm.script(
        Reply(content="Hello! I can help you sort the CSV files here. What next?"),
        Reply(
            content="The parser drops the last field.",
            tool_calls=[Call("create_file", {"path": "notes.txt", "content": "x"})],
        ),
        Reply(content="Fixed."),
    )
    client, other = web.connect(), web.connect()
    greeting = client.send("hi")
    client.wait_done(greeting)
    parser = client.send("Can you please fix the parser bug? It fails on empty lines.")
    client.wait_done(parser)
    listed = {c["id"]: c["title"] for c in client.call("list_conversations", {})["conversations"]}
    # A bare greeting takes its title from the answer; a request loses its "can you please".
    assert listed == {
        greeting: "I can help you sort the CSV files here",
        parser: "Fix the parser bug?",
    }

    ack = client.call("rename_conversation", {"conversation_id": greeting, "title": "  CSV  work "})
    assert ack == {"ok": True, "title": "CSV work"}
    assert updates(other, greeting)[-1] == {"id": greeting, "title": "CSV work"}
    blank = client.call("rename_conversation", {"conversation_id": greeting, "title": "   "})
    assert blank["error"]["code"] == "bad_request"

    by_title = client.call("list_conversations", {"query": "csv"})["conversations"]
    assert [c["id"] for c in by_title] == [greeting]
    by_content = client.call("list_conversations", {"query": "LAST FIELD"})["conversations"]
    assert [c["id"] for c in by_content] == [parser]
    assert "drops the last field" in by_content[0]["snippet"]
    assert client.call("list_conversations", {"query": "nowhere"})["conversations"] == []

    journal = web.data_dir / "undo" / "tasks" / parser
    assert any(journal.iterdir())
    assert client.call(
        "set_memory", {"conversation_id": parser, "scope": "task", "content": "remember me"}
    )["ok"]
    assert client.call("delete_conversation", {"conversation_id": parser}) == {"ok": True}
    assert updates(other, parser)[-1] == {"id": parser, "deleted": True}
    assert not journal.exists()
    assert not (web.data_dir / "memory" / "tasks" / f"{parser}.md").exists()
    assert not (web.data_dir / "conversations" / parser).exists()
    assert [c["id"] for c in client.call("list_conversations", {})["conversations"]] == [greeting]
    gone = client.call("get_conversation", {"conversation_id": parser})
    assert gone["error"]["code"] == "not_found"
    again = client.call("delete_conversation", {"conversation_id": parser})
    assert again["error"]["code"] == "not_found"


def test_a_conversation_keeps_its_mode_approval_and_how_tasks_ended(
    make_web: Callable[..., Web], fake_llm: FakeLLM
):
    web = make_web()
    fake_llm.script(
        Reply(content="slow " * 40, chunk_size=5, delay=0.02, usage=(1200, 80)),
        Reply(content=long_answer("never finished", 200), chunk_size=4, delay=0.02),
    )
    client, other = web.connect(), web.connect()
    cid = client.send("think about it", mode="thinking", approval="ask")
    listed = client.call("list_conversations", {})
    assert listed["running"] == [cid]
    running = client.call("get_conversation", {"conversation_id": cid})
    assert running["running"] and running["status"]["state"] in ("thinking", "streaming")
    client.wait_done(cid)
    other.wait_for("conversation_update", running=False)
    assert [u["running"] for u in updates(other, cid)] == [True, False]  # not in the room

    client.send("again, but stop", cid)
    client.wait_for("token")
    assert client.call("cancel", {"conversation_id": cid})["ok"]
    client.wait_done(cid)
    got = client.call("get_conversation", {"conversation_id": cid})
    assert (got["mode"], got["approval"]) == ("thinking", "ask")
    assert got["context_limit"] > 0 and "status" not in got
    first, second = [m["id"] for m in got["messages"] if m["role"] == "user"]
    ends = got["conversation"]["meta"]["task_ends"]
    # deepseek-v4-flash: 0.14 and 0.28 USD per million input and output tokens (model/prices.py)
    cost = {"amount": pytest.approx(1200 * 0.14e-6 + 80 * 0.28e-6, rel=0.01), "currency": "USD"}
    assert ends[first] == {
        "reason": "complete",
        "usage": {"prompt_tokens": 1200, "completion_tokens": 80, "cost": cost},
    }
    assert ends[second]["reason"] == "cancelled"
    answer = next(m for m in got["messages"] if m["role"] == "assistant")
    assert answer["meta"]["usage"] == {"prompt_tokens": 1200, "completion_tokens": 80}

    restarted = make_web().connect()  # the same data folder: what was chosen comes back
    again = restarted.call("get_conversation", {"conversation_id": cid})
    assert (again["mode"], again["approval"]) == ("thinking", "ask")


def test_undo_preview_lists_what_goes_and_what_comes_back(web: Web, fake_llm: FakeLLM):
    (web.workspace / "README.md").write_text("before\n")
    fake_llm.script(
        Reply(
            tool_calls=[
                Call("create_file", {"path": "new.txt", "content": "made"}),
                Call(
                    "modify_file", {"path": "README.md", "operation": "append", "content": "after"}
                ),
            ]
        ),
        Reply(content="done"),
    )
    client = web.connect()
    cid = client.send("change things")
    client.wait_done(cid)
    preview = client.call("undo_preview", {"conversation_id": cid})
    assert preview["ok"] and not preview["undone"]
    assert preview["files"] == [
        {"path": "README.md", "action": "restore"},
        {"path": "new.txt", "action": "remove"},
    ]
    ack = client.call("undo_task", {"conversation_id": cid})
    assert ack["removed"] == ["new.txt"] and set(ack["restored"]) == {"README.md", "new.txt"}
    assert (web.workspace / "README.md").read_text() == "before\n"
    after = client.call("undo_preview", {"conversation_id": cid})
    assert after["undone"] and after["files"] == []


def test_focus_files_and_memory_from_the_page(web: Web, fake_llm: FakeLLM):
    for name in ("a.py", "b.py", "c.py", "d.py"):
        (web.workspace / name).write_text(f"# the {name} file\n")
    (web.workspace / "folder").mkdir()
    fake_llm.script(Reply(content="seen"), Reply(content="seen again"))
    client = web.connect()
    cid = client.send("look", focus=["a.py"])  # a new conversation starts with its pins
    client.wait_done(cid)
    assert "# the a.py file" in fake_llm.chat_requests[-1].messages[0]["content"]

    def focus(path: str, event: str = "focus_file") -> dict[str, Any]:
        return client.call(event, {"conversation_id": cid, "path": path})

    assert focus("b.py")["focus"] == ["a.py", "b.py"]
    assert focus("./c.py")["focus"] == ["a.py", "b.py", "c.py"]
    assert focus("d.py")["error"]["code"] == "invalid"  # three at most
    assert focus("a.py", "unfocus_file")["focus"] == ["b.py", "c.py"]
    assert focus("folder")["error"]["code"] == "invalid"
    assert focus("../outside.txt")["error"]["code"] == "invalid"
    assert client.call("get_conversation", {"conversation_id": cid})["focus"] == ["b.py", "c.py"]

    saved = client.call("set_memory", {"scope": "main", "content": "Use tabs."})
    assert saved["ok"] and saved["content"] == "Use tabs.\n"
    too_big = client.call("set_memory", {"scope": "main", "content": "x" * (saved["limit"] + 1)})
    assert too_big["error"]["code"] == "invalid"
    no_conversation = client.call("set_memory", {"scope": "task", "content": "x"})
    assert no_conversation["error"]["code"] == "bad_request"
    memory = client.call("get_memory", {"conversation_id": cid})
    assert memory["main"] == "Use tabs.\n" and memory["task"] == ""
    client.send("and now?", cid)
    client.wait_done(cid)
    system = fake_llm.chat_requests[-1].messages[0]["content"]
    assert "Use tabs." in system and "# the c.py file" in system and "# the a.py" not in system


def test_changes_to_gitignored_paths_stay_out_of_the_tree(web: Web, fake_llm: FakeLLM):
    (web.workspace / ".gitignore").write_text("build/\n")
    fake_llm.script(
        Reply(
            tool_calls=[
                Call("create_file", {"path": "build/out.txt", "content": "x"}),
                Call("create_file", {"path": "src.txt", "content": "y"}),
            ]
        ),
        Reply(content="done"),
    )
    client = web.connect()
    cid = client.send("build")
    events = client.wait_done(cid)
    shown = [c["path"] for p in payloads(events, "file_tree") for c in p["changes"]]
    assert "src.txt" in shown and not any(p.startswith("build") for p in shown)
    client.clear()
    assert client.call("undo_task", {"conversation_id": cid})["ok"]
    undone = [c["path"] for p in client.named("file_tree") for c in p["changes"]]
    assert "src.txt" in undone and not any(p.startswith("build") for p in undone)


def test_the_cli_reopens_a_conversation_with_its_agent_mode_and_approval(
    fake_llm: FakeLLM, tmp_path: Path
) -> None:
    settings = make_settings(fake_llm, tmp_path, approval="ask")
    fake_llm.script(Reply(content="Done."))
    first = CliTerminal(
        build_services(settings), out=io.StringIO(), err=io.StringIO(), stdin=io.StringIO()
    )
    first.mode, first.approval, first.agent = "thinking", "read-only", "research"
    ask(first, "look around")
    cid = first.conversation_id
    assert cid is not None

    out = io.StringIO()
    second = CliTerminal(build_services(settings), out=out, err=io.StringIO(), stdin=io.StringIO())
    assert (second.mode, second.approval, second.agent) == ("fast", "ask", "general")
    run_command(second, f"/history {cid}")
    assert (second.mode, second.approval, second.agent) == ("thinking", "read-only", "research")
    assert "agent research, mode thinking, approval read-only" in out.getvalue()
