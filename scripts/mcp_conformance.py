"""Run the MCP conformance suite's server scenarios against `main.py web`'s MCP over HTTP.

    .venv/bin/python scripts/mcp_conformance.py [--scenario NAME]... [--keep DIR]
    make mcp-conformance

From a fresh clone after `make install`; needs npm and the npm registry, nothing else.

1. Node 22 and the suite: the suite (`@modelcontextprotocol/conformance`, pinned below) needs
   Node 22 (it calls fs.globSync). Both are installed with npm into a cache folder
   (`$XDG_CACHE_HOME/workspace-agent/mcp-conformance`, else `~/.cache/...`; override with
   MCP_CONFORMANCE_CACHE): the npm package `node` ships the Node binary. The first run
   installs them (~15 s), later ones skip it.
2. The token: the suite's client sends no Authorization header and has no option for one,
   and our server refuses a request without the web token (401). A small proxy on a free
   loopback port adds `Authorization: Bearer TOKEN` to each request and forwards it
   unchanged otherwise (Host included, so the server's Host check still applies); responses,
   SSE streams included, are passed on as they arrive.
3. The server: `main.py web` on the demo model with AGENT_MCP_HTTP=true, in a throwaway
   workspace holding a few files (text, a PNG, a folder), the skills shipped in skills/ as
   prompts, `auto` approval (every tool offered). Every server scenario of the suite is run
   (`--suite all`), each result is read from its checks.json and printed as a table.

The exit status is 0 when the scenarios that fail are exactly those listed in
scripts/mcp_conformance_baseline.yml with a reason each (most name fixtures only the suite's
own reference server has: `test://static-text`, the tool `test_simple_text`, ...), 1 when
another one fails or a listed one now passes. `make mcp-conformance` runs it; a cached run
takes about 5 s (`--keep DIR` keeps the server's log and the suite's checks.json files).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SUITE_VERSION = "0.1.16"
NODE_VERSION = "22"
BASELINE = Path(__file__).with_name("mcp_conformance_baseline.yml")
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000001e221bc330000000049454e44ae426082"
)
START_SECONDS = 60
RESULT_FOLDER = re.compile(r"server-(?P<scenario>.+)-\d{4}-\d\d-\d\dT[\d-]+Z?$")


def cache_dir() -> Path:
    configured = os.environ.get("MCP_CONFORMANCE_CACHE")
    if configured:
        return Path(configured)
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "workspace-agent" / "mcp-conformance"


def install_suite(prefix: Path) -> tuple[Path, Path]:
    """Node 22 and the suite under `prefix` (installed once): the node binary and the
    suite's entry point."""
    node = prefix / "node_modules" / ".bin" / "node"
    entry = prefix / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
    stamp = prefix / f".installed-{NODE_VERSION}-{SUITE_VERSION}"
    if not stamp.exists():
        prefix.mkdir(parents=True, exist_ok=True)
        print(f"installing Node {NODE_VERSION} and the suite {SUITE_VERSION} into {prefix}")
        subprocess.run(
            [
                "npm",
                "install",
                "--prefix",
                str(prefix),
                "--no-audit",
                "--no-fund",
                f"node@{NODE_VERSION}",
                f"@modelcontextprotocol/conformance@{SUITE_VERSION}",
            ],
            check=True,
        )
        stamp.touch()
    return node, entry


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_for_port(port: int, server: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"the web server exited ({server.returncode}):\n{log.read_text()}")
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise SystemExit(
        f"nothing listened on port {port} within {START_SECONDS} s:\n{log.read_text()}"
    )


def make_workspace(root: Path) -> Path:
    workspace = root / "workspace"
    (workspace / "src").mkdir(parents=True)
    (workspace / "README.md").write_text("# Sample\n\nA throwaway workspace.\n")
    (workspace / "notes.txt").write_text("first line\nsecond line\n")
    (workspace / "src" / "app.py").write_text("print('hello')\n")
    (workspace / "logo.png").write_bytes(PNG)
    return workspace


def start_server(root: Path, token: str, web_port: int, mcp_port: int) -> subprocess.Popen[bytes]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("AGENT_")}
    env.update(
        AGENT_PROVIDER="demo",
        AGENT_WEB_TOKEN=token,
        AGENT_APPROVAL="auto",
        AGENT_MCP_HTTP="true",
        AGENT_MCP_HTTP_PORT=str(mcp_port),
    )
    workspace = make_workspace(root)
    argv = [sys.executable, str(REPO / "main.py"), "web", "--workspace", str(workspace)]
    argv += ["--data-dir", str(root / "data"), "--port", str(web_port)]
    log = root / "server.log"
    with log.open("wb") as out:
        server = subprocess.Popen(argv, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)
    wait_for_port(mcp_port, server, log)
    return server


class AuthProxy:
    """HTTP/1.1 to 127.0.0.1:target, `Authorization: Bearer TOKEN` added to each request's
    head (kept-alive connections included); bodies and responses copied as they come."""

    def __init__(self, token: str, target: int) -> None:
        self.header = f"Authorization: Bearer {token}\r\n".encode()
        self.target = target
        self.port = free_port()
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()

    def start(self) -> None:
        threading.Thread(target=self._run, name="auth-proxy", daemon=True).start()
        self._ready.wait()

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(
            asyncio.start_server(self._connection, "127.0.0.1", self.port)
        )
        self._ready.set()
        self._loop.run_forever()

    async def _connection(
        self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter
    ) -> None:
        server_reader, server_writer = await asyncio.open_connection("127.0.0.1", self.target)
        back = asyncio.create_task(_copy(server_reader, client_writer))
        try:
            await self._requests(client_reader, server_writer)
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        finally:
            _end(server_writer)
            await back
            client_writer.close()

    async def _requests(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Each request's head with the header added, then its body; a chunked body is the
        last request forwarded this way (what follows is copied as is)."""
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.split(b"\r\n")
            kept = [line for line in lines[1:-2] if not line.lower().startswith(b"authorization:")]
            writer.write(b"\r\n".join([lines[0], *kept]) + b"\r\n" + self.header + b"\r\n")
            fields = {
                name.strip().lower(): value.strip()
                for name, _, value in (line.partition(b":") for line in kept)
            }
            if b"chunked" in fields.get(b"transfer-encoding", b"").lower():
                await _copy(reader, writer)
                return
            length = int(fields.get(b"content-length", b"0"))
            if length:
                writer.write(await reader.readexactly(length))
            await writer.drain()


async def _copy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while chunk := await reader.read(65536):
            writer.write(chunk)
            await writer.drain()
    except OSError:
        pass  # the other side went away: nothing left to pass on
    _end(writer)


def _end(writer: asyncio.StreamWriter) -> None:
    """Half-close: the peer sees the end of what this side sends."""
    try:
        if not writer.is_closing() and writer.can_write_eof():
            writer.write_eof()
    except OSError:
        pass


@dataclass
class Outcome:
    scenario: str
    passed: bool
    reason: str  # the failed checks' messages
    warnings: list[str]  # the names of the checks of a SHOULD that were not met


def read_outcomes(results: Path) -> list[Outcome]:
    """One outcome per scenario folder (`server-NAME-TIMESTAMP/checks.json`)."""
    outcomes = []
    for folder in sorted(results.iterdir()):
        checks_file = folder / "checks.json"
        named = RESULT_FOLDER.match(folder.name)
        if named is None or not checks_file.exists():
            continue
        name = named["scenario"]
        checks = json.loads(checks_file.read_text())
        failed = [check for check in checks if check.get("status") == "FAILURE"]
        reason = "; ".join(
            f"{check.get('name')}: {check.get('errorMessage') or check.get('description')}"
            for check in failed
        )
        if not checks:
            reason = "no checks"
        warned = [check["name"] for check in checks if check.get("status") == "WARNING"]
        outcomes.append(Outcome(name, not failed and bool(checks), reason, warned))
    return outcomes


def read_baseline() -> dict[str, str]:
    """The scenarios expected to fail and why: `  - NAME  # REASON` under `server:`."""
    expected = {}
    for line in BASELINE.read_text().splitlines():
        stripped = line.strip()
        if stripped.startswith("- "):
            name, _, reason = stripped[2:].partition("#")
            expected[name.strip()] = reason.strip()
    return expected


def print_table(outcomes: list[Outcome], expected: dict[str, str]) -> None:
    width = max(len(outcome.scenario) for outcome in outcomes)
    for outcome in outcomes:
        if outcome.passed:
            verdict = "pass"
            why = f"warnings: {', '.join(outcome.warnings)}" if outcome.warnings else ""
        else:
            verdict = "FAIL"
            why = outcome.reason[:300]
            if outcome.scenario in expected:
                why = f"(expected: {expected[outcome.scenario]}) {why}"
        print(f"{outcome.scenario:<{width}}  {verdict}  {why}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", action="append", default=[], help="run only these")
    parser.add_argument("--keep", type=Path, help="keep the workspace, log and results here")
    args = parser.parse_args()
    if shutil.which("npm") is None:
        raise SystemExit("npm is needed (to install Node 22 and the suite)")
    node, entry = install_suite(cache_dir())
    root = args.keep or Path(tempfile.mkdtemp(prefix="mcp-conformance-"))
    root.mkdir(parents=True, exist_ok=True)
    token = secrets.token_urlsafe(24)
    mcp_port = free_port()
    server = start_server(root, token, free_port(), mcp_port)
    try:
        proxy = AuthProxy(token, mcp_port)
        proxy.start()
        url = f"http://127.0.0.1:{proxy.port}/mcp"
        results = root / "results"
        runs = [["--scenario", name] for name in args.scenario] or [["--suite", "all"]]
        started = time.monotonic()
        for run in runs:
            subprocess.run(
                [str(node), str(entry), "server", "--url", url, "-o", str(results), *run],
                stdout=subprocess.DEVNULL,
                stderr=(root / "suite.log").open("ab"),
                check=False,
            )
        elapsed = time.monotonic() - started
    finally:
        server.terminate()
        server.wait(timeout=30)
    outcomes = read_outcomes(results)
    expected = read_baseline()
    print_table(outcomes, expected)
    passed = sum(outcome.passed for outcome in outcomes)
    print(f"\n{passed} passed, {len(outcomes) - passed} failed in {elapsed:.0f} s")
    if args.keep is None:
        shutil.rmtree(root, ignore_errors=True)
    surprises = [
        outcome.scenario for outcome in outcomes if outcome.passed == (outcome.scenario in expected)
    ]
    if surprises:
        print(f"not as scripts/{BASELINE.name} says: {', '.join(surprises)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
