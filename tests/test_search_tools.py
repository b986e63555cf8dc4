"""search_code on real files; web_search without network (missing key, unreachable host)."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from modules.results import ToolError
from modules.tools.search_tools import tavily_search
from modules.tools.tool_context import ToolContext
from tests.kit.tools import call

pytestmark = pytest.mark.ctx(tavily_api_key=None)


@pytest.fixture
def ctx(ctx: ToolContext, tmp_path: Path) -> ToolContext:
    root = ctx.workspace.root
    (root / "src").mkdir()
    (root / "src/app.py").write_text("import os\n\ndef Main():\n    return os.getcwd()  # MAIN\n")
    (root / "README.md").write_text("Run main() to start.\n")
    (root / "image.bin").write_bytes(b"main\x00\x01\x02")
    (root / "huge.txt").write_text("main\n" * 250_000)
    (root / ".git").mkdir()
    (root / ".git/config").write_text("main branch\n")
    (root / "node_modules").mkdir()
    (root / "node_modules/lib.js").write_text("main\n")
    (root / "link.py").symlink_to(tmp_path / "outside.py")
    (tmp_path / "outside.py").write_text("main outside\n")
    return ctx


def test_search_code_finds_lines_case_insensitively(ctx: ToolContext) -> None:
    result = call(ctx, "search_code", query="main")
    assert result.ok
    assert result.output.splitlines() == [
        "README.md:1: Run main() to start.",
        "src/app.py:3: def Main():",
        "src/app.py:4: return os.getcwd()  # MAIN",
    ]


def test_search_code_caps_results(ctx: ToolContext) -> None:
    for i in range(30):
        (ctx.workspace.root / f"f{i:02}.txt").write_text("needle\n" * 3)
    result = call(ctx, "search_code", query="NEEDLE", max_results=10)
    lines = result.output.splitlines()
    assert len(lines) == 11 and "max_results=10" in lines[-1]
    assert lines[0] == "f00.txt:1: needle"


def test_search_code_no_match_and_plain_text(ctx: ToolContext) -> None:
    assert call(ctx, "search_code", query="def \\w+").output == "No matches for 'def \\\\w+'."
    assert not call(ctx, "search_code", query="").ok


def test_search_code_trims_long_lines(ctx: ToolContext) -> None:
    (ctx.workspace.root / "wide.txt").write_text("x" * 500 + " wideword " + "y" * 500 + "\n")
    line = call(ctx, "search_code", query="wideword").output
    assert line.startswith("wide.txt:1: xxx") and line.endswith("…") and len(line) < 250


def test_web_search_without_key(ctx: ToolContext) -> None:
    result = call(ctx, "web_search", query="python")
    assert not result.ok
    assert result.output == "web search is not configured: set TAVILY_API_KEY"


def test_web_search_unreachable_host() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(ToolError, match="web search failed: could not reach"):
        tavily_search("tvly-fake", "python", 3, base_url=f"http://127.0.0.1:{port}")


def test_web_search_formats_results_from_a_local_server(tmp_path: Path) -> None:
    seen: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            seen.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            body = json.dumps(
                {
                    "results": [
                        {"title": "Python", "url": "https://python.org", "content": "The language."}
                    ]
                }
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            return None

    server = HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_port}"
        text = tavily_search("tvly-fake", "python", 2, base_url=url)
    finally:
        server.shutdown()
    assert text.splitlines() == ["1. Python", "   https://python.org", "   The language."]
    assert seen[0]["query"] == "python" and seen[0]["max_results"] == 2
