"""`main.py cli --server URL`: the terminal on a running web workspace (`main.py web` on the
fake model), through workspace_client: `-p`, refusals, and the interactive session in tmux."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from protocol.events import Done
from tests.fake_llm import Call, FakeLLM, Reply
from tests.kit.browser import Served, send
from tests.kit.server import REPO, ServerProcess, agent_env, free_port
from tests.kit.settings import TOKEN
from tests.kit.tty import Tmux, needs_tmux
from tests.kit.waits import wait_until
from workspace_client import Client

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.usefixtures("clean_fake"),
    # approval ask: the page asks too
    pytest.mark.server(env={"AGENT_APPROVAL": "ask"}, files={"notes.md": "# Notes\n"}),
]


def _argv(url: str, *extra: str) -> list[str]:
    return [sys.executable, str(REPO / "main.py"), "cli", "--server", url, *extra]


def _env(fake: FakeLLM, **extra: str) -> dict[str, str]:
    env = agent_env(fake.base_url, fake.api_key)
    del env["AGENT_WEB_TOKEN"]
    return {**env, **extra}


def _run(url: str, fake: FakeLLM, *extra: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        _argv(url, *extra),
        env=_env(fake, **env),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


def test_p_runs_one_task_on_the_server_and_prints_the_answer(server: ServerProcess, fake: FakeLLM):
    fake.script(Reply(content="Answered by the server.", chunk_size=3))
    done = _run(server.url, fake, "--token", TOKEN, "-p", "say it")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Answered by the server.\n"
    [cid] = [
        line.split()[1] for line in done.stderr.splitlines() if line.startswith("conversation:")
    ]
    with Client(server.url, TOKEN) as client:
        messages = client.get_conversation(cid)["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant"]
    # the token in the URL the server printed does too, and the conversation goes on
    fake.script(Reply(content="Second answer."))
    again = _run(f"{server.url}/?token={TOKEN}", fake, "-p", "more", "--conversation", cid[:10])
    assert again.returncode == 0, again.stderr
    assert again.stdout == "Second answer.\n" and f"conversation: {cid}" in again.stderr


def test_p_json_prints_the_events_and_a_declined_call_exits_4(server: ServerProcess, fake: FakeLLM):
    fake.script(
        Reply(tool_calls=[Call("run_command", {"command": "echo hi"})]), Reply(content="fine")
    )
    done = _run(server.url, fake, "-p", "run it", "--approval", "ask", AGENT_WEB_TOKEN=TOKEN)
    assert done.returncode == 4, done.stderr
    assert "error: declined: run_command needed approval" in done.stderr
    fake.script(Reply(content="as json"))
    json_run = _run(server.url, fake, "--json", "-p", "x", AGENT_WEB_TOKEN=TOKEN)
    assert json_run.returncode == 0, json_run.stderr
    names = [line.split('"')[3] for line in json_run.stdout.splitlines()]
    assert names[-1] == "done" and "token" in names


def test_a_wrong_token_a_missing_one_and_no_server_exit_2(server: ServerProcess, fake: FakeLLM):
    wrong = _run(server.url, fake, "--token", "not-the-token-at-all", "-p", "x")
    assert wrong.returncode == 2 and "refused the token" in wrong.stderr, wrong.stderr
    missing = _run(server.url, fake, "-p", "x")
    assert missing.returncode == 2 and "needs the web server's token" in missing.stderr
    nobody = _run(f"http://127.0.0.1:{free_port()}", fake, "--token", TOKEN, "-p", "x")
    assert nobody.returncode == 2 and "is `main.py web` running" in nobody.stderr, nobody.stderr
    unknown = _run(server.url, fake, "--token", TOKEN, "-p", "x", "--conversation", "zz99")
    assert unknown.returncode == 2 and "no conversation 'zz99'" in unknown.stderr


def _prompted(screen: str) -> bool:
    return screen.rstrip().endswith("›")


@needs_tmux()
def test_the_terminal_asks_an_approval_and_lists_the_servers_conversations(
    server: ServerProcess, fake: FakeLLM, tmp_path: Path
):
    fake.script(
        Reply(tool_calls=[Call("run_command", {"command": "echo from-the-terminal"})]),
        Reply(content="The command ran."),
    )
    argv = _argv(server.url, "--approval", "ask")
    with Tmux(argv, env=_env(fake, AGENT_WEB_TOKEN=TOKEN), cwd=tmp_path) as term:
        term.wait_for("/help for commands")
        term.type("run the echo")
        term.wait_for("Allow? [y]es / [n]o / [a]lways for this tool:")
        term.type("y")
        screen = term.wait_for(lambda s: "The command ran." in s and _prompted(s))
        assert "from-the-terminal" in screen
        term.type("/history")
        screen = term.wait_for("opens one")
        assert "run the echo" in screen
        term.type("/status")
        term.wait_for("approval ask")
        term.type("/mcp restart nothing")
        term.wait_for("no MCP server 'nothing'")
        term.type("/bogus")
        term.wait_for("unknown command /bogus")
        term.keys("C-d")
        term.wait_for("[exit 0]")


@needs_tmux()
@pytest.mark.browser
def test_a_task_started_in_the_terminal_is_approved_in_the_page(
    served: Served, page: Any, tmp_path: Path
):
    server, fake_llm, workspace = served
    fake_llm.script(
        Reply(tool_calls=[Call("run_command", {"command": "echo approved > page.txt"})]),
        Reply(content="Written after the page said yes."),
    )
    argv = _argv(server.url, "--approval", "ask")
    with Tmux(argv, env=_env(fake_llm, AGENT_WEB_TOKEN=TOKEN), cwd=tmp_path) as term:
        term.wait_for("/help for commands")
        term.type("write page.txt")
        term.wait_for("Allow? [y]es / [n]o / [a]lways for this tool:")
        page.goto(f"{server.url}/?token={TOKEN}")
        page.locator(".conv-row", has_text="write page.txt").click()
        card = page.locator(".tool-card[data-state=approval] .tool-approval")
        card.wait_for()
        assert "echo approved > page.txt" in card.inner_text()
        page.click("[data-testid=approve]")
        screen = term.wait_for(lambda s: "Written after the page said yes." in s and _prompted(s))
        assert "answered in another window." in screen
        page.wait_for_selector(".assistant-message:has-text('Written after the page said yes.')")
        term.keys("C-d")
        term.wait_for("[exit 0]")
    assert (workspace / "page.txt").read_text() == "approved\n"
    assert page.console_errors == []


@needs_tmux()
@pytest.mark.browser
def test_the_terminal_follows_a_task_the_page_runs(served: Served, page: Any, tmp_path: Path):
    server, fake_llm, _ = served
    fake_llm.script(
        Reply(tool_calls=[Call("run_command", {"command": "echo from-the-page"})]),
        Reply(content="The page's task is done."),
    )
    page.goto(f"{server.url}/?token={TOKEN}")
    send(page, "a task of the page")
    page.locator(".tool-card[data-state=approval]").wait_for()
    with Client(server.url, TOKEN) as client:
        [cid] = [c["id"] for c in client.conversations() if c["running"]]
    argv = _argv(server.url, "--conversation", cid[:8])
    with Tmux(argv, env=_env(fake_llm, AGENT_WEB_TOKEN=TOKEN), cwd=tmp_path) as term:
        term.wait_for("Allow? [y]es / [n]o / [a]lways for this tool:")
        term.type("y")
        screen = term.wait_for(lambda s: "The page's task is done." in s and _prompted(s))
        assert "from-the-page" in screen
        page.wait_for_selector('.assistant-message:has-text("The page\'s task is done.")')
        term.keys("C-d")
        term.wait_for("[exit 0]")
    assert page.console_errors == []


@needs_tmux()
def test_a_task_another_client_starts_streams_at_the_idle_prompt_and_is_approved_there(
    server: ServerProcess, fake: FakeLLM, tmp_path: Path
):
    fake.script(
        Reply(content="First answer."),
        Reply(tool_calls=[Call("run_command", {"command": "echo from-elsewhere"})]),
        Reply(content="The other client's task is done."),
    )
    with Tmux(_argv(server.url), env=_env(fake, AGENT_WEB_TOKEN=TOKEN), cwd=tmp_path) as term:
        term.wait_for("/help for commands")
        term.type("hello")
        term.wait_for(lambda s: "First answer." in s and _prompted(s))
        term.keys("-l", "half typed")  # the user is typing when the other task starts
        with Client(server.url, TOKEN) as other:
            cid = other.conversations()[0]["id"]  # the newest: the terminal's
            other.send("a task of another window", cid, approval="ask")
            screen = term.wait_for("type it at the prompt (a page may answer first)")
            assert "run_command wants to run:" in screen and "echo from-elsewhere" in screen
            assert screen.rstrip().endswith("› half typed")  # redrawn under the lines printed
            term.keys("C-u")
            term.type("y")
            screen = term.wait_for(
                lambda s: "The other client's task is done." in s and _prompted(s)
            )
            assert "from-elsewhere" in screen and "answered in another window." not in screen
            reasons = [e.reason for e in other.events(cid) if isinstance(e, Done)]
        assert reasons == ["complete"]
        term.keys("C-d")
        term.wait_for("[exit 0]")


def test_the_slash_commands_act_on_the_servers_conversation(
    server: ServerProcess, fake: FakeLLM, tmp_path: Path
):
    fake.script(
        Reply(tool_calls=[Call("create_file", {"path": "made.txt", "content": "made\n"})]),
        Reply(content="Made it.", usage=(1200, 34)),
        Reply(content="Second answer."),
        Reply(content="Continued."),
        Reply(content="The summary of the first turns."),
    )
    outside = tmp_path / "sent.txt"
    outside.write_text("a file of the terminal's machine\n")
    lines = [
        "make it",
        "/status",
        "/undo",
        "y",
        "/mode thinking",
        "/agent nope",
        "/agent coder",
        "/agents",
        "/skills",
        f"/attach {outside}",
        "/detach",
        f"/attach {outside}",
        "/attach",
        "/focus notes.md",
        "/memory",
        "/approval revoke run_command",
        "/mcp",
        "second",
        "/continue",
        "/compact keep the file names",
        "/quit",
    ]
    done = subprocess.run(
        _argv(server.url, "--approval", "auto"),
        env=_env(fake, AGENT_WEB_TOKEN=TOKEN),
        cwd=REPO,
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        timeout=60,
    )
    out, err = done.stdout, done.stderr
    assert done.returncode == 0, err
    assert "context 1,234 / " in out  # the stored usage of the last model call
    assert "remove  made.txt" in out and "Undo it? [y/N]" in out
    assert not (server.workspace / "made.txt").exists()
    assert "mode: thinking" in out and "agent: coder" in out and "* coder" in out
    assert "no agent 'nope'" in err
    assert "  code-review  " in out  # /skills lists the shipped skills
    assert "1 attached file dropped" in out and "  uploads/sent-2.txt" in out
    assert "focus: notes.md" in out and "main memory:" in out
    assert "run_command is not always allowed" in err
    assert "no MCP servers" in out
    assert "Second answer." in out and "Continued." in out
    assert "the server summarises the older turns now" in out
    with Client(server.url, TOKEN) as client:
        cid = out.split(" · conversation ")[1].split()[0]  # /status said it

        def summarised() -> dict[str, Any] | None:
            conversation = client.get_conversation(cid)
            return None if conversation["running"] else conversation

        conversation = wait_until(summarised, what="the compaction's end")
    assert conversation["mode"] == "thinking" and conversation["agent"] == "coder"
    assert conversation["focus"] == ["notes.md"]
    users = [m for m in conversation["messages"] if m["role"] == "user"]
    assert [m["content"] for m in users] == ["make it", "second", "continue"]
    assert users[1]["meta"]["attachments"][0]["path"] == "uploads/sent-2.txt"
    [summary] = [m for m in conversation["messages"] if (m.get("meta") or {}).get("summary")]
    assert summary["meta"]["summary"]["instructions"] == "keep the file names"
    # a terminal that saw no task of it: /status has the context the summary left
    opened = subprocess.run(
        _argv(server.url, "--conversation", cid),
        env=_env(fake, AGENT_WEB_TOKEN=TOKEN),
        cwd=REPO,
        input="/status\n",
        capture_output=True,
        text=True,
        timeout=60,
    )
    after = summary["meta"]["summary"]["tokens_after"]
    assert after > 0 and f"context {after:,} / " in opened.stdout, opened.stdout
