"""The README's Python examples run as written against a live server (only the address, port
and token are this test server's)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fake_llm import FakeLLM, echo_responder
from tests.kit.server import ServerProcess, free_port
from tests.kit.settings import TOKEN

README = Path(__file__).resolve().parent.parent / "README.md"
MCP_PORT = free_port()
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.usefixtures("clean_fake"),
    pytest.mark.server(
        env={"AGENT_MCP_HTTP": "true", "AGENT_MCP_HTTP_PORT": str(MCP_PORT)},
        files={"notes.txt": "first line\n"},
    ),
]
RUN_SECONDS = 60


def examples(needle: str) -> list[str]:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    return [block for block in blocks if needle in block]


def run(code: str, server: ServerProcess, tmp_path: Path) -> str:
    code = (
        code.replace("http://127.0.0.1:5000", server.url)
        .replace("http://127.0.0.1:5002", f"http://127.0.0.1:{MCP_PORT}")
        .replace('"TOKEN"', repr(TOKEN))
        .replace("Bearer TOKEN", f"Bearer {TOKEN}")
    )
    script = tmp_path / "example.py"
    script.write_text(code, encoding="utf-8")
    done = subprocess.run(  # outside the repository: the package as installed
        [sys.executable, str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=RUN_SECONDS,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_python_client_example_streams_an_answer_to_its_end(
    server: ServerProcess, fake: FakeLLM, tmp_path: Path
) -> None:
    (code,) = examples("with Client(")
    fake.responder = echo_responder()
    out = run(code, server, tmp_path)
    assert "Echo: List the files and summarise them" in out
    assert out.rstrip().endswith("[complete]")


def test_the_asyncio_client_example_streams_an_answer(
    server: ServerProcess, fake: FakeLLM, tmp_path: Path
) -> None:
    (code,) = examples("AsyncClient.connect")
    fake.responder = echo_responder()
    assert "Echo: What is in notes.txt?" in run(code, server, tmp_path)


def test_the_mcp_over_http_example_lists_the_workspace_files(
    server: ServerProcess, tmp_path: Path
) -> None:
    (code,) = examples("streamable_http_client")
    assert "workspace:///notes.txt" in run(code, server, tmp_path)
