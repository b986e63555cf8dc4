"""The collaborators a MainTerminal is given, built once per process from the settings."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from modules.annotations import AnnotationStore
from modules.memory_manager import MemoryStore
from modules.paths import Workspace
from modules.proposals import ProposalStore
from modules.registry import ToolRegistry
from modules.sandbox import CommandRunner
from modules.sandbox_factory import build_runner
from modules.tools import build_registry
from modules.undo import UndoJournal
from utils.api_client import ApiClient, OnWait
from utils.cancel import CancelToken
from utils.completion import StreamItem
from utils.conversation_store import ConversationStore
from utils.logger import setup_logging
from utils.providers import ProviderConfig, resolve_provider
from utils.settings import Settings


class ModelClient(Protocol):
    def stream(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], *,
        thinking: bool, cancel: CancelToken, on_wait: OnWait | None = None,
    ) -> Iterator[StreamItem]: ...


@dataclass
class AgentServices:
    settings: Settings
    provider: ProviderConfig
    model: ModelClient
    tools: ToolRegistry
    store: ConversationStore
    workspace: Workspace
    runner: CommandRunner
    memory: MemoryStore
    annotations: AnnotationStore
    journal: UndoJournal
    proposals: ProposalStore

    def close(self) -> None:
        """Release what outlives a task: the sandbox's containers."""
        self.runner.close()


def build_services(settings: Settings) -> AgentServices:
    """Wire the real implementations together, logging to the data dir."""
    settings.workspace.mkdir(parents=True, exist_ok=True)
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    logs = settings.data_dir / "logs"
    stream_log = setup_logging(logs, redact_content=settings.log_redact_content)
    provider = resolve_provider(settings)
    workspace = Workspace(settings.workspace)
    journal = UndoJournal(settings.data_dir, workspace)
    return AgentServices(
        settings=settings,
        provider=provider,
        model=ApiClient(provider, settings, on_raw_delta=stream_log),
        tools=build_registry(),
        store=ConversationStore(settings.data_dir),
        workspace=workspace,
        runner=build_runner(settings),
        memory=MemoryStore(settings.data_dir),
        annotations=AnnotationStore(settings.data_dir),
        journal=journal,
        proposals=ProposalStore(settings.data_dir, workspace, journal),
    )
