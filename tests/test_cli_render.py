"""What the terminal front shows: Markdown answers streamed block by block in a real terminal
(tmux), tool calls one per line, command output once, coloured diffs, Ctrl-C at an approval
prompt, and `-p` keeping stdout for the answer alone."""

from __future__ import annotations

import io
import subprocess
from pathlib import Path

import pytest

from cli.markdown import block_starts
from cli.painter import GREEN, RED, diff_path
from cli.printer import EventPrinter
from protocol.events import Token, ToolEvent
from tests.fake_llm import Call, FakeLLM, Reply
from tests.kit.server import agent_argv
from tests.kit.tty import ANSI, HEIGHT, Tmux, clean_env, needs_tmux

ANSWER = (
    "# Release notes\n\nThis version is **much faster** than the last one.\n\n"
    "- first point\n- second point\n\nThe rest comes after a pause."
)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    folder = tmp_path / "ws"
    folder.mkdir()
    return folder


def _env(fake_llm: FakeLLM, **extra: str) -> dict[str, str]:
    return clean_env(
        AGENT_PROVIDER="deepseek",
        AGENT_BASE_URL=fake_llm.base_url,
        AGENT_API_KEY=fake_llm.api_key,
        AGENT_MODE="fast",
        **extra,
    )


def _argv(workspace: Path, *extra: str) -> list[str]:
    return agent_argv("cli", workspace, workspace.parent / "data", *extra)


@needs_tmux()
def test_answer_renders_as_markdown_while_it_streams(fake_llm: FakeLLM, workspace: Path):
    # The stream pauses inside the list: the finished blocks are on screen for good already.
    fake_llm.script(Reply(content=ANSWER, chunk_size=6, stall_after=15, stall=1.5))
    with Tmux(
        _argv(workspace, "-p", "what changed?", "--approval", "auto"),
        env=_env(fake_llm),
        cwd=workspace.parent,
    ) as term:
        during = term.wait_for("first point")
        assert "[exit" not in during and "The rest" not in during
        assert "Release notes" in during and "# Release" not in during
        assert "This version is much faster than the last one." in during
        screen = term.wait_for("[exit 0]")
        coloured = term.screen(escapes=True)
    lines = [line.rstrip() for line in screen.splitlines()]
    assert "**" not in screen and "# Release" not in screen
    assert "Release notes" in lines
    assert [line for line in lines if "point" in line] == [" • first point", " • second point"]
    assert "The rest comes after a pause." in lines
    assert screen.count("This version is much faster") == 1  # redrawn live, printed once
    assert "\x1b[1mmuch faster" in coloured  # bold, not asterisks


@needs_tmux()
def test_a_block_taller_than_the_screen_scrolls_once(fake_llm: FakeLLM, workspace: Path):
    code = "\n".join(f"row_{n} = {n}" for n in range(70))
    fake_llm.script(
        Reply(
            content=f"Here:\n\n```python\n{code}\n```\n\nAfter the code.",
            chunk_size=40,
            delay=0.005,
        )
    )
    with Tmux(
        _argv(workspace, "-p", "code please", "--approval", "auto"),
        env=_env(fake_llm),
        cwd=workspace.parent,
    ) as term:
        screen = term.wait_for("[exit 0]")
        # Nothing drawn and then taken back: the output, longer than the screen, ends at its
        # bottom, with no blank rows left below it.
        assert term.cursor_row() == HEIGHT - 1
    lines = [line.strip() for line in screen.splitlines()]
    assert [line for line in lines if line.startswith("row_")] == code.splitlines()
    assert lines.index("After the code.") > lines.index("row_69 = 69")


@needs_tmux()
def test_no_color_prints_the_markdown_as_written(fake_llm: FakeLLM, workspace: Path):
    fake_llm.script(Reply(content=ANSWER))
    argv = ["env", "NO_COLOR=1", *_argv(workspace, "-p", "what changed?", "--approval", "auto")]
    with Tmux(argv, env=_env(fake_llm), cwd=workspace.parent) as term:
        term.wait_for("[exit 0]")
        screen = term.screen(escapes=True)
    assert "# Release notes" in screen and "**much faster**" in screen
    assert "\x1b[" not in screen.replace("\x1b[0m", "").replace("\x1b[39m", "")


@needs_tmux()
def test_approval_shows_a_coloured_diff_and_ctrl_c_declines(fake_llm: FakeLLM, workspace: Path):
    (workspace / "notes.txt").write_text("old line\nkept\n")
    fake_llm.script(
        Reply(
            content="I'll update the notes.",
            tool_calls=[
                Call(
                    "modify_file",
                    {
                        "path": "notes.txt",
                        "operation": "replace",
                        "old_text": "old line",
                        "new_text": "new line",
                    },
                )
            ],
        ),
        Reply(content="Understood, I left **notes.txt** alone."),
    )
    with Tmux(
        _argv(workspace, "--approval", "ask"), env=_env(fake_llm), cwd=workspace.parent
    ) as term:
        term.wait_for("/help for commands")
        term.type("update the notes")
        coloured = term.wait_for("Allow? [y]es", escapes=True)
        assert "modify_file wants to change notes.txt:" in ANSI.sub("", coloured)
        assert f"{RED}-old line" in coloured and f"{GREEN}+new line" in coloured
        term.keys("C-c")
        screen = term.wait_for("left notes.txt alone.")
        term.wait_for(lambda s: s.rstrip().endswith("›"))
        term.type("/quit")
        screen = term.wait_for("[exit 0]")
    lines = screen.splitlines()
    prompt = next(n for n, line in enumerate(lines) if line.startswith("Allow? [y]es"))
    assert lines[prompt].rstrip().endswith("^C")  # the line ends there, the next one is clean
    assert lines[prompt + 1] == "declined: modify_file does not run."
    assert lines[prompt + 2] == "✗ modify_file declined"  # not the text the model is sent
    assert "Do not retry" not in screen
    assert "Traceback" not in screen and "KeyboardInterrupt" not in screen
    assert (workspace / "notes.txt").read_text() == "old line\nkept\n"
    tool_message = fake_llm.chat_requests[-1].messages[-1]
    assert tool_message["role"] == "tool" and "declined" in tool_message["content"]


def test_one_shot_stdout_holds_only_the_answer(fake_llm: FakeLLM, workspace: Path):
    fake_llm.script(
        Reply(
            reasoning="Let me think.",
            tool_calls=[
                Call("run_command", {"command": "printf 'alpha\\nbeta\\n'"}),
                Call("list_files", {}),
            ],
        ),
        Reply(content="Both ran: **alpha** and beta."),
    )
    result = subprocess.run(
        _argv(workspace, "-p", "run it", "--approval", "auto", "--mode", "thinking"),
        env=_env(fake_llm),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "Both ran: **alpha** and beta.\n"
    err = result.stderr.splitlines()
    assert "thinking: Let me think." in err
    assert err.index('⚙ run_command {"command": "printf \'alpha\\\\nbeta\\\\n\'"}') < err.index(
        "⚙ list_files {}"
    )  # each call on its own line
    assert [line for line in err if line.startswith("│")] == ["│ alpha", "│ beta"]
    # in the command, its output and the answer streamed there too; not in the result
    assert result.stderr.count("alpha") == 3
    done = next(line for line in err if line.startswith("✓ run_command ("))
    assert "ms): exit code 0, duration" in done  # the status line only: the output was shown


def test_one_shot_decline_exits_non_zero_with_the_reason(fake_llm: FakeLLM, workspace: Path):
    fake_llm.script(
        Reply(tool_calls=[Call("run_command", {"command": "touch made-it"})]),
        Reply(content="I could not run it."),
    )
    result = subprocess.run(
        _argv(workspace, "-p", "make it", "--approval", "ask"),
        env=_env(fake_llm),
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 4, result.stderr
    assert result.stdout == "I could not run it.\n"
    reason = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(reason) == 1 and "run_command" in reason[0] and "--approval auto" in reason[0]
    assert not (workspace / "made-it").exists()


def test_args_and_results_fit_one_line_each_and_diffs_get_colour():
    out = io.StringIO()
    printer = EventPrinter(out, out, color=False)
    printer.render(ToolEvent("c1", "create_file", "start"))
    printer.render(ToolEvent("c1", "create_file", "args", delta='{"content": "' + "x" * 900))
    printer.render(ToolEvent("c1", "create_file", "result", ok=True, output="done", duration_ms=3))
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("⚙ create_file {") and lines[0].endswith("…")
    assert len(lines[0]) < 450 and lines[1] == "✓ create_file (3 ms)"
    colour = EventPrinter(io.StringIO(), io.StringIO(), color=True)
    shown = colour.approval_text(
        ToolEvent(
            "c2", "modify_file", "approval", preview="--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n+b\n"
        )
    )
    assert "modify_file wants to change x.py:" in ANSI.sub("", shown)
    assert f"{RED}-a" in shown and f"{GREEN}+b" in shown
    command = colour.approval_text(ToolEvent("c3", "run_command", "approval", preview="ls -l"))
    assert ANSI.sub("", command) == "run_command wants to run:\n  ls -l\n"


def test_diff_path_and_markdown_blocks():
    assert diff_path("--- a/src/x.py\n+++ b/src/x.py\n@@") == "src/x.py"
    assert diff_path("--- /dev/null\n+++ b/new.txt\n") == "new.txt"
    assert diff_path("--- a/gone.txt\n+++ /dev/null\n") == "gone.txt"
    assert diff_path("ls -l") is None
    text = "# T\npara\nmore\n\n- a\n- b\n\n  still b\n\n```\ncode\n\nstill code\n```\nafter"
    starts = block_starts(text)
    assert [text[s : s + 4] for s in starts] == ["# T\n", "para", "- a\n", "```\n", "afte"]


def test_answers_of_two_model_calls_in_a_row_each_render():
    out = io.StringIO()
    printer = EventPrinter(out, out, color=True)
    printer.render(Token("m1", "First **one**."))
    printer.render(Token("m2", "Second."))
    printer.finish()
    text = ANSI.sub("", out.getvalue())
    assert "First one." in text and text.rstrip().endswith("Second.") and "**" not in text
