"""What a test scripts (Reply, Call, ErrorReply) and what the fake records (RecordedRequest)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Call:
    """One tool call the fake model makes.

    `args` is serialised to JSON; `raw` sends exact argument text instead (may be invalid
    JSON); `pieces` sends the arguments in exactly these fragments. `id` defaults to the
    flavour's id style; "" sends none (a server that gives no ids).
    """

    name: str
    args: dict[str, Any] | None = None
    raw: str | None = None
    pieces: list[str] | None = None
    id: str | None = None

    @property
    def arguments(self) -> str:
        if self.pieces is not None:
            return "".join(self.pieces)
        if self.raw is not None:
            return self.raw
        return json.dumps(self.args or {}, ensure_ascii=False)


@dataclass
class Reply:
    """A successful model answer.

    Reasoning is only sent when the request is in thinking mode for the flavour (deepseek:
    `thinking.type` not "disabled"; kimi: a thinking model; openai: never), like the real APIs.
    `chunk_size` is the largest fragment in characters; with `split_seed`, fragment sizes are
    random in 1..chunk_size. `interleave` mixes the fragments of several tool calls by index.
    `delay` sleeps before every chunk, `latency` before the response headers; `stall_after`
    pauses `stall` seconds once that many data chunks are out (a model that hangs mid-answer).
    `cut_after` closes the connection after that many data chunks, without `[DONE]`.
    `stamp` replaces each streamed content fragment, as it is sent, by the send time:
    `time.time_ns()` in decimal and a `;`; `content` then only sets how many fragments there are.
    `finish_reason` replaces the one the reply earns (`stop`, `tool_calls`): `length`, say;
    `says_finish=False` leaves it null on the last chunk, `[DONE]` still sent, as
    llama-cpp-python does at times. `legacy_call` streams the one tool call as the pre-tools
    API did: `delta.function_call` alone, no id, `finish_reason: "function_call"`.
    """

    content: str = ""
    reasoning: str = ""
    tool_calls: list[Call] = field(default_factory=list)
    chunk_size: int = 8
    split_seed: int | None = None
    interleave: bool = False
    delay: float = 0.0
    latency: float = 0.0
    stall_after: int | None = None
    stall: float = 30.0
    cut_after: int | None = None
    usage: tuple[int, int] | None = None
    cached_tokens: int = 0  # of the prompt's, said cached in the flavour's usage shape
    finish_reason: str | None = None
    says_finish: bool = True
    legacy_call: bool = False
    stamp: bool = False

    def __post_init__(self) -> None:
        if self.legacy_call and len(self.tool_calls) != 1:
            raise ValueError("a legacy_call reply makes exactly one tool call")


@dataclass
class ErrorReply:
    """An HTTP error with a provider-style body `{"error": {message, type, code, param}}`."""

    status: int = 500
    message: str = "The server had an error while processing your request."
    type: str | None = None
    code: str | None = None
    param: str | None = None
    retry_after: float | None = None
    latency: float = 0.0

    def body(self) -> dict[str, Any]:
        """The JSON error body."""
        return error_body(
            self.message, self.type or _default_type(self.status), self.code, self.param
        )


@dataclass
class RawReply:
    """Exactly these bytes with this status and content type: what a misbehaving server or a
    proxy in the way answers (an HTML page, a whole JSON reply, a stream of the wrong shape)."""

    body: str
    content_type: str = "text/html; charset=utf-8"
    status: int = 200


Response = Reply | ErrorReply | RawReply


@dataclass
class RecordedRequest:
    """One HTTP request the fake received; `headers` keys are lower-case."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any = None
    status: int | None = None
    hung_up: bool = False  # the client closed a streamed reply's connection before its end

    @property
    def messages(self) -> list[dict[str, Any]]:
        body = self.body if isinstance(self.body, dict) else {}
        messages = body.get("messages")
        return messages if isinstance(messages, list) else []

    @property
    def last_user_text(self) -> str:
        for message in reversed(self.messages):
            if isinstance(message, dict) and message.get("role") == "user":
                content = message.get("content")
                return content if isinstance(content, str) else json.dumps(content)
        return ""


Responder = Callable[[RecordedRequest], Response]


def error_body(
    message: str, type_: str, code: str | None = None, param: str | None = None
) -> dict[str, Any]:
    """A provider-style error body."""
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}


def _default_type(status: int) -> str:
    if status == 401:
        return "authentication_error"
    if status == 429:
        return "rate_limit_error"
    if status >= 500:
        return "server_error"
    return "invalid_request_error"


def long_answer(phrase: str, count: int) -> str:
    """`count` numbered `phrase`s, as long as `phrase` said `count` times but never a passage
    said again: a reply saying one over and over is stopped as a loop (core/text_loops.py)."""
    return " ".join(f"{phrase} {n}," for n in range(count))


def echo_responder(*, delay: float = 0.0, chunk_size: int = 8) -> Responder:
    """A responder answering every request with a short streamed echo of the last user text."""

    def respond(request: RecordedRequest) -> Response:
        return Reply(content=f"Echo: {request.last_user_text}", delay=delay, chunk_size=chunk_size)

    return respond
