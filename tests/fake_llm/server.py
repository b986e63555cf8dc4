"""FakeLLM: a strict OpenAI-compatible chat-completions server over real HTTP, for tests."""

from __future__ import annotations

import contextlib
import json
import socket
import sys
import threading
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from tests.fake_llm.flavours import FLAVOURS
from tests.fake_llm.replies import (
    ErrorReply,
    RawReply,
    RecordedRequest,
    Reply,
    Responder,
    Response,
)
from tests.fake_llm.validation import Invalid, ReasoningKey, forced_tool, validate_chat
from tests.fake_llm.wire import (
    Answer,
    completion_body,
    requested_tokens,
    resolve,
    stamp,
    stream_frames,
)

DEFAULT_API_KEY = "sk-fake-0123456789abcdef"
CHAT_PATHS = ("/v1/chat/completions", "/chat/completions")
MODEL_PATHS = ("/v1/models", "/models")


class FakeLLM:
    """A fake model API on 127.0.0.1; script replies with `script()` or set `responder`.

    With `context_window`, a request asking more tokens than that (its messages and tools as
    `requested_tokens` counts them, plus `max_tokens`) is refused as the flavour's server
    refuses it, before any scripted response is taken.
    """

    def __init__(
        self,
        flavour: str = "deepseek",
        *,
        api_key: str = DEFAULT_API_KEY,
        host: str = "127.0.0.1",
        port: int = 0,
        ignores_tool_choice: bool = False,
        context_window: int | None = None,
    ) -> None:
        self.flavour = FLAVOURS[flavour]
        # A server that takes `tool_choice` but answers as it likes (Ollama does): a scripted
        # reply need not call the named function. Otherwise it must, as a real API forces it.
        self.ignores_tool_choice = ignores_tool_choice
        self.context_window = context_window
        self.api_key = api_key
        self.requests: list[RecordedRequest] = []
        self.responder: Responder | None = None
        self._address = (host, port)
        self._script: deque[Response] = deque()
        self._reasoning_calls: set[ReasoningKey] = set()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server: _Server | None = None

    @property
    def base_url(self) -> str:
        host, port = self._address
        return f"http://{host}:{port}/v1"

    @property
    def models(self) -> tuple[str, ...]:
        return self.flavour.models

    @property
    def model(self) -> str:
        """The flavour's default (first) model."""
        return self.flavour.models[0]

    @property
    def chat_requests(self) -> list[RecordedRequest]:
        """The chat-completions requests received, in order (refused ones included)."""
        return [r for r in self.requests if r.path in CHAT_PATHS]

    @property
    def pending(self) -> int:
        """How many scripted responses are still queued."""
        return len(self._script)

    def drop_script(self) -> int:
        """Forget the queued responses (a failed test's, which would answer the next test's
        calls); how many there were."""
        with self._lock:
            left = len(self._script)
            self._script.clear()
            return left

    def script(self, *responses: Response) -> None:
        """Queue responses; each chat request that passes validation consumes the next one."""
        with self._lock:
            self._script.extend(responses)

    def start(self) -> FakeLLM:
        """Start serving in a background thread."""
        self._stopping.clear()
        self._server = _Server(self._address, _Handler, self)
        self._address = (self._address[0], self._server.server_address[1])
        threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="fake-llm",
            daemon=True,
        ).start()
        return self

    def stop(self) -> None:
        """Stop serving and cut every open connection."""
        if self._server is None:
            return
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()
        self._server.cut_all()
        self._server = None

    def __enter__(self) -> FakeLLM:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def handle(self, handler: _Handler, request: RecordedRequest) -> None:
        """Answer one recorded request through `handler`."""
        with self._lock:
            self.requests.append(request)
        refusal = self._refusal(request)
        if refusal is not None:
            _send_error(handler, request, refusal, self._stopping)
        elif request.path in MODEL_PATHS and request.method == "GET":
            data = [
                {"id": m, "object": "model", "created": 0, "owned_by": self.flavour.name}
                for m in self.models
            ]
            _send_json(handler, request, 200, {"object": "list", "data": data})
        else:
            self._answer_chat(handler, request)

    def _refusal(self, request: RecordedRequest) -> ErrorReply | None:
        key = request.headers.get("authorization", "").removeprefix("Bearer ").strip()
        if key != self.api_key:
            return ErrorReply(401, self.flavour.auth_error(key), code="invalid_api_key")
        known = request.path in CHAT_PATHS + MODEL_PATHS
        if not known or (request.path in CHAT_PATHS) != (request.method == "POST"):
            return ErrorReply(404, f"Invalid URL ({request.method} {request.path})")
        if request.path in MODEL_PATHS:
            return None
        with self._lock:
            remembered = set(self._reasoning_calls)
        try:
            validate_chat(request.body, self.flavour, remembered)
        except Invalid as err:
            return ErrorReply(
                err.status, err.message, type=err.type, code=err.code, param=err.param
            )
        return None

    def _next_response(self, request: RecordedRequest) -> Response:
        with self._lock:
            if self._script:
                return self._script.popleft()
            number = len(self.chat_requests)
        if self.responder is not None:
            return self.responder(request)
        return ErrorReply(
            500,
            f"fake_llm: test bug: chat request #{number} arrived but no "
            "scripted response is left and no responder is set; script more "
            "replies with fake.script(...) or set fake.responder",
            code="fake_llm_test_bug",
        )

    def _answer_chat(self, handler: _Handler, request: RecordedRequest) -> None:
        prompt, completion = requested_tokens(request.body)
        if self.context_window is not None and prompt + (completion or 0) > self.context_window:
            if request.body.get("stream") and self.flavour.streams_nothing_when_too_long:
                _send_raw(handler, request, RawReply("", "text/event-stream; charset=utf-8"))
                return
            message, code = self.flavour.context_error(self.context_window, prompt, completion)
            refusal = ErrorReply(400, message, code=code, param="messages")
            _send_error(handler, request, refusal, self._stopping)
            return
        response = self._next_response(request)
        forced = forced_tool(request.body)
        if isinstance(response, Reply) and forced and not self.ignores_tool_choice:
            response = _forced_reply(response, forced)
        if isinstance(response, ErrorReply):
            _send_error(handler, request, response, self._stopping)
            return
        if isinstance(response, RawReply):
            _send_raw(handler, request, response)
            return
        answer = resolve(response, self.flavour, request.body)
        if answer.reasoning:
            with self._lock:
                self._reasoning_calls.update((cid, call.arguments) for cid, call in answer.calls)
        if self._stopping.wait(response.latency):
            return
        if request.body.get("stream"):
            _send_stream(handler, request, answer, self._stopping)
        else:
            _send_json(handler, request, 200, completion_body(answer))


def _forced_reply(reply: Reply, name: str) -> Response:
    """The reply when `tool_choice` names `name`: a real API makes the model call it (and
    only it), so a scripted reply that does not is a test bug, said as one."""
    names = {call.name for call in reply.tool_calls}
    if names == {name}:
        return reply
    return ErrorReply(
        500,
        f"fake_llm: test bug: the request's tool_choice names {name!r}, which a real API "
        f"forces, but the scripted reply calls {sorted(names) or 'nothing'}; script a call "
        "of it, or use FakeLLM(ignores_tool_choice=True) for a server that ignores the field",
        code="fake_llm_test_bug",
    )


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256

    def __init__(self, address: tuple[str, int], handler: type[_Handler], fake: FakeLLM) -> None:
        self.fake = fake
        self.connections: set[socket.socket] = set()
        self.connections_lock = threading.Lock()
        super().__init__(address, handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hung up is normal traffic, not an error worth a traceback."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)

    def cut_all(self) -> None:
        with self.connections_lock:
            connections = list(self.connections)
        for connection in connections:
            _shutdown(connection)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 60
    server: _Server

    def setup(self) -> None:
        super().setup()
        with self.server.connections_lock:
            self.server.connections.add(self.connection)

    def finish(self) -> None:
        with self.server.connections_lock:
            self.server.connections.discard(self.connection)
        super().finish()

    def log_message(self, format: str, *args: Any) -> None:
        return

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def _serve(self) -> None:
        headers = {k.lower(): v for k, v in self.headers.items()}
        raw = self.rfile.read(int(headers.get("content-length") or 0))
        request = RecordedRequest(self.command, self.path.split("?")[0], headers)
        try:
            request.body = json.loads(raw) if raw else None
        except ValueError:
            request.body = raw.decode("utf-8", "replace")  # validation answers 400
        self.server.fake.handle(self, request)


def _send_json(
    handler: _Handler,
    request: RecordedRequest,
    status: int,
    body: dict[str, Any],
    headers: dict[str, str] | None = None,
) -> None:
    data = json.dumps(body, ensure_ascii=False).encode()
    request.status = status
    try:
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            handler.send_header(name, value)
        handler.end_headers()
        handler.wfile.write(data)
    except OSError:
        handler.close_connection = True


def _send_raw(handler: _Handler, request: RecordedRequest, reply: RawReply) -> None:
    data = reply.body.encode()
    request.status = reply.status
    handler.send_response(reply.status)
    handler.send_header("Content-Type", reply.content_type)
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


def _send_error(
    handler: _Handler, request: RecordedRequest, reply: ErrorReply, stopping: threading.Event
) -> None:
    if stopping.wait(reply.latency):
        return
    headers = {"Retry-After": f"{reply.retry_after:g}"} if reply.retry_after is not None else {}
    _send_json(handler, request, reply.status, reply.body(), headers)


def _send_stream(
    handler: _Handler, request: RecordedRequest, answer: Answer, stopping: threading.Event
) -> None:
    reply: Reply = answer.reply
    request.status = 200
    sent = 0
    try:
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream; charset=utf-8")
        handler.send_header("Cache-Control", "no-cache")
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        for frame in stream_frames(answer):
            is_data = frame.startswith("data:")
            pause = reply.delay + (reply.stall if is_data and sent == reply.stall_after else 0)
            if (is_data and sent == reply.cut_after) or stopping.wait(pause):
                _cut(handler)
                return
            _write_chunk(handler, (stamp(frame) if reply.stamp else frame).encode())
            sent += is_data
        handler.wfile.write(b"0\r\n\r\n")
    except OSError:
        request.hung_up = True
        handler.close_connection = True


def _write_chunk(handler: _Handler, data: bytes) -> None:
    handler.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")


def _cut(handler: _Handler) -> None:
    handler.close_connection = True
    _shutdown(handler.connection)


def _shutdown(connection: socket.socket) -> None:
    with contextlib.suppress(OSError):
        connection.shutdown(socket.SHUT_RDWR)
