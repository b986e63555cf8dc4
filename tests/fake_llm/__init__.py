"""A strict fake of the OpenAI-compatible model APIs (DeepSeek, Kimi, OpenAI) over real HTTP."""

from tests.fake_llm.replies import (
    Call,
    ErrorReply,
    RawReply,
    RecordedRequest,
    Reply,
    Responder,
    Response,
    echo_responder,
    long_answer,
)
from tests.fake_llm.server import DEFAULT_API_KEY, FakeLLM

__all__ = [
    "DEFAULT_API_KEY",
    "Call",
    "ErrorReply",
    "FakeLLM",
    "RawReply",
    "RecordedRequest",
    "Reply",
    "Responder",
    "Response",
    "echo_responder",
    "long_answer",
]
