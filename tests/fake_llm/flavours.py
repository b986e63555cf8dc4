"""The providers the fake imitates: their models, thinking switches, ids and error wording."""

from __future__ import annotations

import random
import string
import time
import uuid
from dataclasses import dataclass
from typing import Any, Literal

UsagePlace = Literal["last_chunk", "choice", "extra_chunk", "none"]

# Top-level request fields the OpenAI API accepts; anything else is a 400 there.
OPENAI_FIELDS = frozenset(
    {
        "model",
        "messages",
        "stream",
        "stream_options",
        "tools",
        "tool_choice",
        "temperature",
        "top_p",
        "max_tokens",
        "max_completion_tokens",
        "n",
        "stop",
        "presence_penalty",
        "frequency_penalty",
        "user",
        "seed",
        "response_format",
        "parallel_tool_calls",
        "reasoning_effort",
        "logprobs",
        "top_logprobs",
        "metadata",
        "store",
        "logit_bias",
        "service_tier",
        "modalities",
        "prediction",
        "verbosity",
        "prompt_cache_key",
        "safety_identifier",
    }
)


@dataclass(frozen=True)
class Flavour:
    """One provider's wire behaviour."""

    name: str
    models: tuple[str, ...]
    usage_place: UsagePlace
    model_error_status: int
    sends_null_fields: bool  # deepseek sends `"content": null` next to reasoning and back

    def is_thinking(self, body: dict[str, Any]) -> bool:
        """Whether this request runs in thinking mode (so reasoning is streamed)."""
        model = str(body.get("model", ""))
        switch = body.get("thinking")
        disabled = isinstance(switch, dict) and switch.get("type") == "disabled"
        if self.name == "deepseek":
            return not disabled
        if self.name == "kimi":
            always_thinks = model.startswith("kimi-k2.7-code")
            return always_thinks or (model.startswith("kimi-k2.") and not disabled)
        return False

    def tool_call_id(self, name: str, index: int, earlier_calls: int) -> str:
        """A tool call id in the provider's style."""
        if self.name == "kimi":
            return f"functions.{name}:{earlier_calls + index}"
        if self.name == "llamacpp":  # llama-cpp-python: index, name and completion id
            return f"call__{index}_{name}_cmpl-{uuid.uuid4()}"
        alphabet = string.ascii_letters + string.digits
        suffix = "".join(random.choices(alphabet, k=24))
        if self.name == "deepseek":
            return f"call_{index:02d}_{suffix}"
        return f"call_{suffix}"

    @property
    def repeats_call_head(self) -> bool:
        """llama-cpp-python sends a call's id, type and name in every fragment, and the same
        fragment again as the legacy `function_call`."""
        return self.name == "llamacpp"

    def first_delta(self, reasoning: bool, calls: bool) -> dict[str, Any]:
        """The delta of the first chunk, which names the role."""
        if self.sends_null_fields and reasoning:
            return {"role": "assistant", "content": None, "reasoning_content": ""}
        if self.name == "llamacpp":  # role alone; a reply with calls nulls the rest
            nulls = {"content": None, "function_call": None, "tool_calls": None}
            return {"role": "assistant", **(nulls if calls else {})}
        return {"role": "assistant", "content": ""}

    def completion_id(self) -> str:
        """A completion id in the provider's style."""
        if self.name == "deepseek":
            return str(uuid.uuid4())
        return f"chatcmpl-{uuid.uuid4().hex[:24]}"

    def model_error(self, model: str) -> tuple[int, str, str, str | None]:
        """(status, message, type, code) for an unknown model."""
        if self.name == "deepseek":
            return 400, "Model Not Exist", "invalid_request_error", "invalid_request_error"
        if self.name == "kimi":
            return (
                404,
                f"Not found the model {model} or Permission denied",
                "resource_not_found_error",
                None,
            )
        return (
            404,
            f"The model `{model}` does not exist or you do not have access to it.",
            "invalid_request_error",
            "model_not_found",
        )

    def auth_error(self, key: str | None) -> str:
        """The 401 message for a wrong or missing key."""
        if not key:
            return (
                "You didn't provide an API key. You need to provide your API key in an "
                "Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY)."
            )
        shown = f"****{key[-4:]}" if len(key) > 4 else "****"
        if self.name == "deepseek":
            return f"Authentication Fails, Your api key: {shown} is invalid"
        return f"Incorrect API key provided: {shown}. Invalid Authentication"

    def context_error(
        self, window: int, prompt: int, completion: int | None
    ) -> tuple[str, str | None]:
        """(message, code) of the 400 for a request over the context window."""
        requested = prompt + (completion or 0)
        if self.name == "kimi":
            return f"Invalid request: Your request exceeded model token limit: {window}", None
        if self.name == "openai":
            return (
                f"This model's maximum context length is {window} tokens. However, your "
                f"messages resulted in {requested} tokens. Please reduce the length of the "
                "messages.",
                "context_length_exceeded",
            )
        message = (
            f"This model's maximum context length is {window} tokens. However, you requested "
            f"{requested} tokens ({prompt} in the messages, {completion} in the completion). "
            "Please reduce the length of the messages or completion."
        )
        return message, "context_length_exceeded" if self.name == "llamacpp" else None

    @property
    def streams_nothing_when_too_long(self) -> bool:
        """llama-cpp-python answers a streamed request over its window with 200 and an empty
        event stream (its reason only in its log); the hosted APIs with the 400."""
        return self.name == "llamacpp"

    def reasoning_error(self, index: int) -> str:
        """The 400 message when a thinking-mode tool-call message comes back without reasoning."""
        if self.name == "kimi":
            return (
                f"thinking is enabled but reasoning_content is missing in assistant tool "
                f"call message at index {index}"
            )
        return (
            f"Missing `reasoning_content` field in the assistant message at message index "
            f"{index}. The reasoning_content in the thinking mode must be passed back to "
            f"the API."
        )

    def chunk_base(self, completion_id: str, model: str) -> dict[str, Any]:
        """The fields every chunk of one completion repeats."""
        base: dict[str, Any] = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": model,
        }
        if self.name not in ("kimi", "llamacpp"):
            base["system_fingerprint"] = f"fp_{uuid.uuid4().hex[:10]}"
        return base


FLAVOURS = {
    "deepseek": Flavour(
        "deepseek", ("deepseek-v4-flash", "deepseek-v4-pro"), "last_chunk", 400, True
    ),
    "kimi": Flavour(
        "kimi",
        (
            "kimi-k2.6",
            "kimi-k2.5",
            "kimi-k2.7-code",
            "kimi-k2.7-code-highspeed",
            "moonshot-v1-128k",
        ),
        "choice",
        404,
        False,
    ),
    "openai": Flavour(
        "openai",
        ("gpt-5.4", "gpt-5.4-mini", "gpt-5.5", "gpt-4.1", "gpt-4.1-mini", "gpt-4o-mini"),
        "extra_chunk",
        404,
        False,
    ),
    # llama-cpp-python's server (0.3.x, as captured in tests/fake_llm/captures/): no usage
    # even when asked, a first chunk with the role alone, its own call ids.
    "llamacpp": Flavour("llamacpp", ("smollm2-135m-instruct",), "none", 404, False),
}
