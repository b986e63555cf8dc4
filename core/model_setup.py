"""What a task runs with that the user may change while the program runs: the settings, the
provider and the model clients (docs/protocol.md §2, the user's settings file). A task takes
the setup of its start and keeps it to its end; a change makes a new one for the next tasks."""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, Unpack

from model.api_client import ApiClient
from model.completion import CallOptions, StreamItem
from model.messages import ChatMessage
from model.providers import ProviderConfig, resolve_provider
from utils.settings import Settings

if TYPE_CHECKING:
    from core.agent_specs import AgentSpec


class ModelClient(Protocol):
    def stream(
        self,
        messages: Sequence[ChatMessage],
        tools: list[dict[str, Any]],
        **options: Unpack[CallOptions],
    ) -> Generator[StreamItem, None, None]: ...


StreamLog = Callable[[str], None]


@dataclass
class ModelSetup:
    """The settings, their provider and its client; the clients of agents with their own."""

    settings: Settings
    provider: ProviderConfig
    model: ModelClient
    stream_log: StreamLog | None = None
    _models: dict[tuple[str, str], ModelClient] = field(default_factory=dict)

    @classmethod
    def of(cls, settings: Settings, stream_log: StreamLog | None) -> ModelSetup:
        """The setup the settings make."""
        provider = resolve_provider(settings)
        return cls(settings, provider, model_client(provider, settings, stream_log), stream_log)

    def model_for(self, agent: AgentSpec) -> ModelClient:
        """The client an agent's calls use: the configured one, or its own provider/model."""
        if agent.provider is None and agent.model is None:
            return self.model
        key = (agent.provider or self.settings.provider, agent.model or "")
        if key not in self._models:
            update: dict[str, Any] = {"provider": key[0]}
            if agent.model:
                update["model"] = agent.model
            config = resolve_provider(self.settings.model_copy(update=update))
            self._models[key] = model_client(config, self.settings, self.stream_log)
        return self._models[key]


def model_client(
    config: ProviderConfig, settings: Settings, stream_log: StreamLog | None
) -> ModelClient:
    """The client of a provider: the demo plays its scripts in-process, the others are APIs."""
    if config.name == "demo":
        from model.demo import DemoModel

        return DemoModel(settings.demo_pace)
    return ApiClient(config, settings, on_raw_delta=stream_log)
