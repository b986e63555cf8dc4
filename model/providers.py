"""Model providers: presets, their quirks, and turning stored messages into API messages."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, NotRequired, TypedDict

from model.messages import ChatMessage, ContentPart
from protocol.records import Role, ToolCallRecord
from utils.settings import Settings
from utils.user_settings import PROVIDER_KEYS

# How a provider switches thinking on and off for one request.
#   thinking_type:   body field `thinking: {"type": "enabled" | "disabled"}` (DeepSeek V4)
#   enable_thinking: body field `enable_thinking: bool` (DashScope, SiliconFlow)
#   none:            no switch; thinking, if any, comes from a separate thinking model
ThinkingSwitch = Literal["thinking_type", "enable_thinking", "none"]

# Whether a call that must get a tool call names it in `tool_choice` (OpenAI's format:
# `{"type": "function", "function": {"name": ...}}`).
#   named:       always
#   not_thinking: only on calls that do not think (Kimi answers 400 "tool_choice ... is
#                incompatible with thinking enabled")
#   off:         never; the model is only asked in words
ToolChoice = Literal["named", "not_thinking", "off"]


@dataclass(frozen=True)
class ProviderPreset:
    """What we know about one provider out of the box."""

    name: str
    base_url: str | None
    model: str | None
    context_window: int
    key_env: str | None  # the provider's own key variable; None: no key needed
    thinking_model: str | None = None  # a separate model for thinking calls
    thinking_switch: ThinkingSwitch = "none"
    # The API answers 400 when an assistant message with tool_calls comes back without
    # `reasoning_content`, so that field is always sent on such messages (even empty).
    reasoning_on_tool_calls: bool = False
    tool_message_name: bool = False  # `tool` messages carry the function `name`
    tool_choice: ToolChoice = "named"


PRESETS: dict[str, ProviderPreset] = {
    "deepseek": ProviderPreset(
        "deepseek",
        "https://api.deepseek.com",
        "deepseek-v4-flash",
        1_000_000,
        "DEEPSEEK_API_KEY",
        thinking_switch="thinking_type",
        reasoning_on_tool_calls=True,
        tool_choice="not_thinking",
    ),
    "kimi": ProviderPreset(
        "kimi",
        "https://api.moonshot.ai/v1",
        "kimi-k2.6",
        262_144,
        "MOONSHOT_API_KEY",
        thinking_switch="thinking_type",
        reasoning_on_tool_calls=True,
        tool_message_name=True,
        tool_choice="not_thinking",
    ),
    "qwen": ProviderPreset(
        "qwen",
        "https://dashscope.aliyuncs.com/compatible-mode/v1",
        "qwen-plus",
        131_072,
        "DASHSCOPE_API_KEY",
        thinking_switch="enable_thinking",
    ),
    "siliconflow": ProviderPreset(
        "siliconflow",
        "https://api.siliconflow.cn/v1",
        "deepseek-ai/DeepSeek-V3.2",
        131_072,
        "SILICONFLOW_API_KEY",
        thinking_switch="enable_thinking",
    ),
    "openai": ProviderPreset(
        "openai",
        "https://api.openai.com/v1",
        "gpt-5.4",
        400_000,
        "OPENAI_API_KEY",
    ),
    "custom": ProviderPreset("custom", None, None, 32_768, None),
    # Scripted tasks played in-process (model/demo.py): no key, no network.
    "demo": ProviderPreset("demo", "in-process", "scripted", 128_000, None, tool_choice="off"),
}


@dataclass(frozen=True)
class ProviderConfig:
    """The provider as configured: preset plus settings, ready for the API client."""

    name: str
    base_url: str
    api_key: str | None
    model: str
    thinking_model: str  # the model for thinking calls (the same model when no separate one)
    context_window: int
    key_env: str  # the variable to set for the key
    thinking_switch: ThinkingSwitch = "none"
    reasoning_on_tool_calls: bool = False
    tool_message_name: bool = False
    tool_choice: ToolChoice = "named"
    key_required: bool = True
    images: bool = False  # user messages may carry `image_url` parts (see accepts_images)

    @property
    def problem(self) -> str | None:
        """Why the provider cannot be used yet, naming what to set; None when ready."""
        if not self.base_url:
            return f"Provider '{self.name}' needs a base URL: set AGENT_BASE_URL."
        if not self.model:
            return f"Provider '{self.name}' needs a model: set AGENT_MODEL."
        if self.key_required and not self.api_key:
            return f"No API key for provider '{self.name}': set {self.key_env} (or AGENT_API_KEY)."
        return None

    @property
    def configured(self) -> bool:
        return self.problem is None

    def model_for(self, thinking: bool) -> str:
        """The model a call uses."""
        return self.thinking_model if thinking else self.model

    def thinking_body(self, thinking: bool) -> dict[str, Any]:
        """Extra request-body fields that switch thinking on or off."""
        if self.thinking_switch == "thinking_type":
            return {"thinking": {"type": "enabled" if thinking else "disabled"}}
        if self.thinking_switch == "enable_thinking":
            return {"enable_thinking": thinking}
        return {}

    def tool_choice_body(self, required: str | None, thinking: bool) -> dict[str, Any]:
        """The `tool_choice` field that asks for a call of the tool `required`, when the
        provider takes it for this call; else nothing (the prompt alone asks for it)."""
        if required is None or self.tool_choice == "off":
            return {}
        if thinking and self.tool_choice == "not_thinking":
            return {}
        return {"tool_choice": {"type": "function", "function": {"name": required}}}


def resolve_provider(settings: Settings) -> ProviderConfig:
    """Apply the settings to the preset (docs/protocol.md §2: AGENT_* win over the preset)."""
    preset = PRESETS[settings.provider]
    own_field = PROVIDER_KEYS.get(preset.name)
    own_key = getattr(settings, own_field) if own_field else None
    model = settings.model or preset.model or ""
    return ProviderConfig(
        name=preset.name,
        base_url=(settings.base_url or preset.base_url or "").rstrip("/"),
        api_key=settings.api_key or own_key,
        model=model,
        thinking_model=settings.thinking_model or preset.thinking_model or model,
        context_window=settings.context_window or preset.context_window,
        key_env=preset.key_env or "AGENT_API_KEY",
        thinking_switch=preset.thinking_switch,
        reasoning_on_tool_calls=preset.reasoning_on_tool_calls,
        tool_message_name=preset.tool_message_name,
        tool_choice=_tool_choice(preset, settings),
        key_required=preset.key_env is not None,
        images=settings.vision
        if settings.vision is not None
        else accepts_images(preset.name, model),
    )


def _tool_choice(preset: ProviderPreset, settings: Settings) -> ToolChoice:
    """AGENT_TOOL_CHOICE: true sends it on every call that must get a tool call, false never."""
    if settings.tool_choice is None:
        return preset.tool_choice
    return "named" if settings.tool_choice else "off"


# Models documented as taking `image_url` content parts, by provider; anything else is sent
# text only (AGENT_VISION=true says otherwise for a model this table does not know).
_IMAGE_MODELS: dict[str, re.Pattern[str]] = {
    "openai": re.compile(r"gpt-4o|gpt-4\.1|gpt-4\.5|gpt-5|o1(?!-mini)|o3(?!-mini)|o4", re.I),
    "kimi": re.compile(r"vision|kimi-latest|kimi-k2\.5", re.I),
    "qwen": re.compile(r"-vl|qvq|omni", re.I),
    "siliconflow": re.compile(r"-vl|vl2|glm-4\.\dv", re.I),
    "demo": re.compile(r"^scripted$"),  # reads an image's format and size (model/demo_inputs.py)
}


def accepts_images(provider: str, model: str) -> bool:
    """Whether the provider documents image input for this model (DeepSeek: none)."""
    pattern = _IMAGE_MODELS.get(provider)
    return bool(pattern and pattern.search(model))


class ApiMessage(TypedDict):
    """A message as the provider's chat completions API takes it."""

    role: Role
    content: str | list[ContentPart]
    tool_call_id: NotRequired[str]
    name: NotRequired[str]
    tool_calls: NotRequired[list[ToolCallRecord]]
    reasoning_content: NotRequired[str]


def prepare_messages(records: Sequence[ChatMessage], config: ProviderConfig) -> list[ApiMessage]:
    """Turn stored records (docs/protocol.md §5) into the API's messages for this provider."""
    return [_api_message(record, config) for record in records]


class PreparedMessages:
    """`prepare_messages` for one client's calls, each record prepared once: records never
    change, and every call of a long conversation sends its whole history again.

    A message is known by its record id and only for that very dict (a copy made for one
    request, such as an expanded or renamed one, is prepared anew). Past `limit` messages
    (about half a kilobyte each) all are forgotten at once.
    """

    def __init__(self, config: ProviderConfig, limit: int = 20_000) -> None:
        self._config = config
        self._limit = limit
        self._known: dict[str, tuple[ChatMessage, ApiMessage]] = {}

    def __call__(self, records: Sequence[ChatMessage]) -> list[ApiMessage]:
        known = self._known
        if len(known) > self._limit:
            known.clear()
        prepared = []
        for record in records:
            key = record.get("id")
            hit = known.get(key) if isinstance(key, str) else None
            if hit is not None and hit[0] is record:
                prepared.append(hit[1])
                continue
            message = _api_message(record, self._config)
            if isinstance(key, str):
                known[key] = (record, message)
            prepared.append(message)
        return prepared


def _api_message(record: ChatMessage, config: ProviderConfig) -> ApiMessage:
    role = record["role"]
    message: ApiMessage = {"role": role, "content": record.get("content") or ""}
    if role == "tool":
        message["tool_call_id"] = record["tool_call_id"]
        if config.tool_message_name and record.get("name"):
            message["name"] = record["name"]
    elif role == "assistant" and record.get("tool_calls"):
        message["tool_calls"] = [
            {
                "id": call["id"],
                "type": "function",
                "function": {
                    "name": call["function"]["name"],
                    "arguments": call["function"]["arguments"],
                },
            }
            for call in record["tool_calls"]
        ]
        reasoning = record.get("reasoning_content") or ""
        if reasoning or config.reasoning_on_tool_calls:
            message["reasoning_content"] = reasoning
    return message
