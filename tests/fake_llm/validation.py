"""Strict request validation: a 400 exactly where the real chat-completions APIs answer one."""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Any

from tests.fake_llm.flavours import OPENAI_FIELDS, Flavour

ROLES = ("system", "user", "assistant", "tool")
TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")

# (tool_call id, arguments) of calls the fake made in a response that carried reasoning.
ReasoningKey = tuple[str, str]


class Invalid(Exception):
    """The request breaks a rule; the fake answers `status` with this message."""

    def __init__(
        self,
        message: str,
        *,
        param: str | None = None,
        status: int = 400,
        type_: str = "invalid_request_error",
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        self.status = status
        self.type = type_
        self.code = code


def validate_chat(body: Any, flavour: Flavour, reasoning_calls: Collection[ReasoningKey]) -> None:
    """Raise Invalid when the chat-completions request would be refused by the real API."""
    if isinstance(body, str):
        raise Invalid("We could not parse the JSON body of your request.")
    if not isinstance(body, dict):
        raise Invalid("Request body must be a JSON object.")
    _check_fields(body, flavour)
    messages = body["messages"]
    for index, message in enumerate(messages):
        _check_message(index, message)
    _check_tool_answers(messages)
    _check_tools(body.get("tools"))
    _check_tool_choice(body, flavour)
    _check_reasoning(messages, flavour, reasoning_calls)


def _check_fields(body: dict[str, Any], flavour: Flavour) -> None:
    if flavour.name == "openai":
        unknown = sorted(set(body) - OPENAI_FIELDS)
        if unknown:
            raise Invalid(f"Unrecognized request argument supplied: {unknown[0]}", param=unknown[0])
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise Invalid("you must provide a model parameter", param="model")
    if model not in flavour.models:
        status, message, type_, code = flavour.model_error(model)
        raise Invalid(message, status=status, type_=type_, code=code, param="model")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise Invalid("'messages' must be a non-empty array.", param="messages")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise Invalid("'stream' must be a boolean.", param="stream")
    options = body.get("stream_options")
    if options is not None and (not stream or not isinstance(options, dict)):
        raise Invalid(
            "The 'stream_options' parameter is only allowed when 'stream' is enabled.",
            param="stream_options",
        )
    thinking = body.get("thinking")
    if (
        thinking is not None
        and flavour.name == "deepseek"
        and (not isinstance(thinking, dict) or thinking.get("type") not in ("enabled", "disabled"))
    ):
        raise Invalid("thinking.type must be 'enabled' or 'disabled'", param="thinking")


def _check_message(index: int, message: Any) -> None:
    where = f"messages[{index}]"
    if not isinstance(message, dict):
        raise Invalid(f"{where} must be an object.", param=where)
    role = message.get("role")
    if role not in ROLES:
        raise Invalid(
            f"Invalid value: '{role}'. Supported values are: 'system', 'user', "
            f"'assistant' and 'tool'.",
            param=f"{where}.role",
        )
    content = message.get("content")
    if role == "assistant" and message.get("tool_calls") is not None:
        _check_tool_calls(where, message["tool_calls"])
        if content is not None and not isinstance(content, str | list):
            raise Invalid(f"{where}.content must be a string or null.", param=f"{where}.content")
        return
    if not isinstance(content, str | list):
        raise Invalid(
            f"Invalid type for '{where}.content': expected a string, got {type(content).__name__}.",
            param=f"{where}.content",
        )
    if role == "tool" and not isinstance(message.get("tool_call_id"), str):
        raise Invalid(
            "Missing parameter 'tool_call_id': messages with role 'tool' must have "
            "a 'tool_call_id'.",
            param=f"{where}.tool_call_id",
        )


def _check_tool_calls(where: str, calls: Any) -> None:
    if not isinstance(calls, list) or not calls:
        raise Invalid(f"{where}.tool_calls must be a non-empty array.", param=f"{where}.tool_calls")
    for number, call in enumerate(calls):
        place = f"{where}.tool_calls[{number}]"
        if not isinstance(call, dict) or not isinstance(call.get("id"), str) or not call["id"]:
            raise Invalid(f"Missing required parameter: '{place}.id'.", param=f"{place}.id")
        if call.get("type") != "function":
            raise Invalid(
                f"Invalid value for '{place}.type': expected 'function'.", param=f"{place}.type"
            )
        function = call.get("function")
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise Invalid(
                f"Missing required parameter: '{place}.function.name'.",
                param=f"{place}.function.name",
            )
        if not isinstance(function.get("arguments"), str):
            raise Invalid(
                f"Invalid type for '{place}.function.arguments': expected a string.",
                param=f"{place}.function.arguments",
            )


def _check_tool_answers(messages: list[dict[str, Any]]) -> None:
    seen: set[str] = set()
    open_ids: list[str] = []  # calls of the current assistant block still unanswered
    block_ids: set[str] = set()
    for index, message in enumerate(messages):
        role = message["role"]
        if role == "tool":
            call_id = message["tool_call_id"]
            if call_id not in block_ids:
                raise Invalid(
                    "Messages with role 'tool' must be a response to a preceding "
                    f"message with 'tool_calls' (tool_call_id '{call_id}' at "
                    f"messages[{index}]).",
                    param=f"messages[{index}]",
                )
            if call_id in open_ids:
                open_ids.remove(call_id)
            continue
        _require_answered(open_ids)
        block_ids = set()
        calls = message.get("tool_calls") if role == "assistant" else None
        for call in calls or []:
            if call["id"] in seen:
                raise Invalid(
                    f"Duplicate tool_call id '{call['id']}' in messages[{index}].",
                    param=f"messages[{index}].tool_calls",
                )
            seen.add(call["id"])
            block_ids.add(call["id"])
            open_ids.append(call["id"])
    _require_answered(open_ids)


def _require_answered(open_ids: list[str]) -> None:
    if open_ids:
        raise Invalid(
            "An assistant message with 'tool_calls' must be followed by tool messages "
            "responding to each 'tool_call_id'. The following tool_call_ids did not "
            f"have response messages: {', '.join(open_ids)}",
            param="messages",
        )


def _check_tools(tools: Any) -> None:
    if tools is None:
        return
    if not isinstance(tools, list):
        raise Invalid("'tools' must be an array.", param="tools")
    names: set[str] = set()
    for number, tool in enumerate(tools):
        place = f"tools[{number}]"
        if not isinstance(tool, dict) or tool.get("type") != "function":
            raise Invalid(
                f"Invalid value for '{place}.type': expected 'function'.", param=f"{place}.type"
            )
        function = tool.get("function")
        if not isinstance(function, dict):
            function = {}  # so no name: refused just below
        name = function.get("name")
        if not isinstance(name, str) or not TOOL_NAME.match(name):
            raise Invalid(
                f"Invalid '{place}.function.name': string does not match pattern. "
                f"Expected a string that matches the pattern '^[a-zA-Z0-9_-]{{1,64}}$'.",
                param=f"{place}.function.name",
            )
        if name in names:
            raise Invalid(f"Duplicate tool name '{name}' in tools.", param=f"{place}")
        names.add(name)
        parameters = function.get("parameters", {"type": "object"})
        if not isinstance(parameters, dict) or parameters.get("type", "object") != "object":
            raise Invalid(
                f"Invalid schema for function '{name}': schema must be a JSON Schema "
                f"of 'type: \"object\"'.",
                param=f"{place}.function.parameters",
            )


def forced_tool(body: dict[str, Any]) -> str | None:
    """The function a request's `tool_choice` names, if it names one."""
    choice = body.get("tool_choice")
    if isinstance(choice, dict) and isinstance(choice.get("function"), dict):
        name = choice["function"].get("name")
        return name if isinstance(name, str) else None
    return None


def _check_tool_choice(body: dict[str, Any], flavour: Flavour) -> None:
    choice = body.get("tool_choice")
    if choice is None:
        return
    if not body.get("tools"):
        raise Invalid(
            "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' "
            "are specified.",
            param="tool_choice",
        )
    if choice in ("none", "auto", "required"):
        return
    name = forced_tool(body)
    if not isinstance(choice, dict) or choice.get("type") != "function" or name is None:
        raise Invalid(
            "Invalid value for 'tool_choice': expected 'none', 'auto', 'required' or "
            '{"type": "function", "function": {"name": ...}}.',
            param="tool_choice",
        )
    if name not in {tool["function"]["name"] for tool in body["tools"]}:
        raise Invalid(
            f"Invalid value for 'tool_choice': function '{name}' is not among the tools.",
            param="tool_choice",
        )
    if flavour.is_thinking(body) and flavour.name == "kimi":
        raise Invalid(
            f"tool_choice '{name}' is incompatible with thinking enabled", param="tool_choice"
        )


def _check_reasoning(
    messages: list[dict[str, Any]], flavour: Flavour, reasoning_calls: Collection[ReasoningKey]
) -> None:
    for index, message in enumerate(messages):
        if message["role"] != "assistant" or not message.get("tool_calls"):
            continue
        if message.get("reasoning_content"):
            continue
        for call in message["tool_calls"]:
            if (call["id"], call["function"]["arguments"]) in reasoning_calls:
                raise Invalid(flavour.reasoning_error(index), param=f"messages[{index}]")
