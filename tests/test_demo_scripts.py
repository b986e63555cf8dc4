"""The demo's scripts on the workspace as it is, under every shipped agent and a plan_execute
one, and with attachments: through the real CLI and server, with the real tools."""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import zlib
from pathlib import Path
from typing import Any

import pytest

from model.demo_scripts import DEMO_DIR
from tests.kit.clients import connected
from tests.kit.demo import BUGGY, FIXED
from tests.kit.server import ServerProcess, agent_argv
from tests.kit.tty import clean_env
from tests.kit.waits import SLOWNESS


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    folder = tmp_path / "ws"
    shutil.copytree(DEMO_DIR / "workspace", folder)
    return folder


def run_cli(workspace: Path, prompt: str, *options: str) -> tuple[list[dict[str, Any]], str]:
    """One `cli -p --json` task: its events, and the answer's text."""
    argv = agent_argv("cli", workspace, workspace.parent / "data", "--approval", "auto", *options)
    result = subprocess.run(
        [*argv, "-p", prompt, "--json"],
        env=clean_env(AGENT_PROVIDER="demo", AGENT_DEMO_PACE="0"),
        capture_output=True,
        text=True,
        timeout=90 * SLOWNESS,
    )
    events = [json.loads(line) for line in result.stdout.splitlines()]
    assert events and events[-1]["event"] == "done", result.stderr
    assert events[-1]["reason"] == "complete", result.stderr
    top = next(e["agent"] for e in events if "agent" in e)  # not a delegate's
    answer = "".join(e["text"] for e in events if e["event"] == "token" and e["agent"] == top)
    return events, answer


def calls(events: list[dict[str, Any]]) -> list[tuple[str, bool]]:
    """(tool, ok) of every call, in order."""
    return [(e["name"], e["ok"]) for e in events if e["event"] == "tool" and e["phase"] == "result"]


def test_fix_twice_then_the_tour_see_the_file_as_it_is(workspace: Path):
    events, _ = run_cli(workspace, "Fix the bug in calc.py")
    assert [name for name, _ in calls(events)] == [
        "read_file",
        "run_command",
        "modify_file",
        "run_command",
    ]
    assert FIXED in (workspace / "calc.py").read_text()

    again, answer = run_cli(workspace, "Fix the bug in calc.py")
    assert calls(again) == [("read_file", True), ("run_command", True)]  # no edit to fail
    assert "## Nothing to fix" in answer and "Start over" in answer
    assert FIXED in (workspace / "calc.py").read_text()

    _, tour = run_cli(workspace, "Give me a tour of this workspace")
    assert "already divides by `len(values)`" in tour and "overstates" not in tour
    assert "`calc.py`" in tour.split("| file |")[0]  # the files as listed now

    (workspace / "calc.py").write_text("def average(values):\n    return 0\n")
    changed, answer = run_cli(workspace, "Fix the bug in calc.py")
    assert calls(changed) == [("read_file", True)]
    assert "no longer looks like the sample" in answer


def test_declined_calls_end_in_a_proposal_at_the_line_where_the_bug_is_now(workspace: Path):
    calc = workspace / "calc.py"
    calc.write_text('"""Moved down by two lines."""\n\n' + calc.read_text())
    events, answer = run_cli(workspace, "Fix the bug in calc.py", "--approval", "ask")
    assert calls(events) == [
        ("read_file", True),
        ("run_command", False),  # declined: -p has no terminal to ask
        ("modify_file", False),
        ("propose_edit", True),
    ]
    proposal = next(e for e in events if e.get("name") == "propose_edit" and e["phase"] == "result")
    assert f"-{BUGGY}+{FIXED}" in proposal["details"]["proposal"]["diff"]  # line 14 now
    assert "I left `calc.py` as it was" in answer

    events, answer = run_cli(workspace, "Fix the bug in calc.py", "--approval", "read-only")
    assert calls(events) == [("read_file", True)]
    assert "**read-only** mode" in answer and "*ask*" in answer


def test_the_summary_with_its_report_already_applied_and_with_other_data(workspace: Path):
    first, _ = run_cli(workspace, "Summarise data.csv")
    proposal = next(e for e in first if e.get("name") == "propose_edit" and e["phase"] == "result")
    assert proposal["ok"]
    report = proposal["details"]["proposal"]["diff"]
    (workspace / "SUMMARY.md").write_text(
        "".join(line[1:] + "\n" for line in report.splitlines()[3:] if line.startswith("+"))
    )
    events, answer = run_cli(workspace, "Summarise data.csv")
    assert calls(events)[-1] == ("propose_edit", False)
    assert "I did not leave `SUMMARY.md` as a proposal" in answer
    assert "already holds" in answer  # the tool's own reason

    data = workspace / "data.csv"
    data.write_text(data.read_text().splitlines()[0] + "\n2025-03-03,croissant,10,1.80\n")
    events, answer = run_cli(workspace, "Summarise data.csv")
    assert [name for name, _ in calls(events)] == ["read_file", "run_python"]
    assert "1 days, 10 items sold, revenue 18.00" in answer and "1,995" not in answer


@pytest.mark.parametrize(
    ("agent", "prompt", "tools", "says"),
    [
        (
            "coder",
            "Fix the bug in calc.py",
            ["read_file", "run_command", "modify_file", "run_command"],
            "## Fixed",
        ),
        ("data", "Fix the bug in calc.py", ["read_file"], "I'm the **data** agent here"),
        ("research", "Fix the bug in calc.py", ["read_file"], "`/agent coder`"),
        ("supervisor", "Fix the bug in calc.py", ["read_file", "delegate_to_coder"], "## Fixed"),
        ("data", "Summarise data.csv", ["read_file", "run_python"], "1,995 items"),
        ("research", "Summarise data.csv", ["read_file"], "Without running the script"),
        ("supervisor", "Summarise data.csv", ["read_file", "delegate_to_data"], "1,995 items"),
        (
            "supervisor",
            "Give me a tour of this workspace",
            ["list_files", "read_file", "read_file"],
            "overstates",
        ),
        (
            "research",
            "Give me a tour of this workspace",
            ["list_files", "read_file", "read_file"],
            "overstates",
        ),
    ],
)
def test_every_shipped_agent_answers_each_task_sensibly(
    workspace: Path, agent: str, prompt: str, tools: list[str], says: str
):
    events, answer = run_cli(workspace, prompt, "--agent", agent)
    top = [
        e["name"]
        for e in events
        if e["event"] == "tool" and e["phase"] == "result" and e["agent"] == agent
    ]
    assert top == tools and all(ok for _, ok in calls(events) if _ != "run_command")
    assert says in answer
    assert "approval mode" not in answer  # the mode is not what stands in the way


def test_a_plan_execute_agent_plans_the_script_and_finishes_each_step(workspace: Path):
    agents = workspace.parent / "data" / "agents"
    agents.mkdir(parents=True)
    (agents / "planner.yaml").write_text(
        'name: planner\ndescription: Plans, then works.\nmode: plan_execute\ntools: ["*"]\n'
    )
    events, answer = run_cli(workspace, "Fix the bug in calc.py", "--agent", "planner")
    plans = [e for e in events if e["event"] == "plan"]
    titles = [s["title"] for s in plans[0]["plan"]["steps"]]
    assert titles[0] == "Read calc.py" and len(titles) == 4
    assert plans[-1]["phase"] == "finished"
    assert {s["status"] for s in plans[-1]["plan"]["steps"]} == {"done"}
    assert "## Fixed" in answer and FIXED in (workspace / "calc.py").read_text()

    again, answer = run_cli(workspace, "Fix the bug in calc.py", "--agent", "planner")
    steps = next(e for e in reversed(again) if e["event"] == "plan")["plan"]["steps"]
    assert [s["status"] for s in steps] == ["done"] * 4
    assert steps[-1]["summary"].startswith("Not needed:")
    assert "## Nothing to fix" in answer
    assert all(ok for _, ok in calls(again))


def _png(width: int, height: int) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    pixels = zlib.compress(b"".join(b"\0" + b"\xff\0\0" * width for _ in range(height)))
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    )


def test_it_sees_what_is_attached_and_talks_about_it(workspace: Path):
    (workspace / "logo.png").write_bytes(_png(64, 48))
    env = {"AGENT_PROVIDER": "demo", "AGENT_DEMO_PACE": "0", "AGENT_APPROVAL": "auto"}
    data = workspace.parent / "data"
    server = ServerProcess(workspace, data, base_url="", api_key="", env=env)
    with server, connected(server.url) as client:
        plain = client.start("What do you make of these?", attachments=["notes.md", "logo.png"])
        events = client.wait_done(plain, 30)
        answer = "".join(e.payload["text"] for e in events if e.name == "token")
        assert "`notes.md`" in answer and "lines of text" in answer
        assert "a PNG image, 64 × 48 pixels" in answer
        assert "as far as I go with attachments" in answer

        task = client.start("Summarise this", attachments=["data.csv"])
        events = client.wait_done(task, 30)
        answer = "".join(e.payload["text"] for e in events if e.name == "token")
        assert "56 rows under the header `date,item,quantity,unit_price`" in answer
        assert "1,995 items" in answer  # and the task itself is played
