"""`main.py cli -p` against the real server, as a user runs it."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.kit.server import agent_argv
from tests.kit.waits import SLOWNESS
from tests.live.servers import RecordingProxy, live_env

pytestmark = pytest.mark.timeout(600)


def run_cli(wire: RecordingProxy, tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    return subprocess.run(
        agent_argv("cli", workspace, tmp_path / "data", *extra),
        env=live_env(wire.base_url),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120 * SLOWNESS,
    )


def test_print_mode_writes_the_real_models_answer(wire: RecordingProxy, tmp_path: Path) -> None:
    done = run_cli(wire, tmp_path, "-p", "Say hello in one short sentence.")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip(), done.stderr


def test_print_mode_json_streams_tokens_then_done(wire: RecordingProxy, tmp_path: Path) -> None:
    done = run_cli(wire, tmp_path, "-p", "Name one colour.", "--json")
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    seqs = [e["seq"] for e in events]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))
    names = [e["event"] for e in events]
    assert "token" in names and names[-1] == "done", names
    assert events[-1]["reason"] == "complete"
    assert "".join(e["text"] for e in events if e["event"] == "token").strip()
