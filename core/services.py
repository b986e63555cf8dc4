"""The collaborators a MainTerminal is given, built once per process from the settings."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from core.agent_loader import load_agents
from core.agent_specs import SHIPPED_AGENTS, AgentCatalog, AgentSpec
from core.model_setup import ModelClient, ModelSetup
from history.store import ConversationStore
from model.api_client import ApiClient
from model.providers import ProviderConfig
from modules.sandbox.disk_floor import Floor
from modules.sandbox.factory import runner_for, sessions_of
from modules.sandbox.runner import CommandRunner
from modules.skills import SkillCatalog, skill_folders
from modules.tools.catalogue import build_registry
from modules.tools.memory import MemoryStore
from modules.tools.proposals import ProposalStore
from modules.tools.registry import ToolRegistry
from modules.undo.journal import UndoJournal
from modules.uploads.attachments import AttachmentStore
from modules.workspace.annotations import AnnotationStore
from modules.workspace.folder import prepare_workspace
from modules.workspace.paths import Workspace
from utils.logger import DebugStreamLog, setup_logging
from utils.settings import Settings

if TYPE_CHECKING:
    from modules.mcp.client import McpManager

log = logging.getLogger(__name__)


@dataclass
class AgentServices:
    setup: ModelSetup  # what the next task runs with; replaced whole by `reconfigure`
    tools: ToolRegistry
    store: ConversationStore
    workspace: Workspace
    runner: CommandRunner
    memory: MemoryStore
    annotations: AnnotationStore
    journal: UndoJournal
    proposals: ProposalStore
    agents: AgentCatalog
    skills: SkillCatalog
    attachments: AttachmentStore
    stream_log: DebugStreamLog | None = None
    mcp: McpManager | None = None

    @property
    def settings(self) -> Settings:
        return self.setup.settings

    @property
    def provider(self) -> ProviderConfig:
        return self.setup.provider

    @property
    def model(self) -> ModelClient:
        return self.setup.model

    def model_for(self, agent: AgentSpec) -> ModelClient:
        """The client an agent's calls use now (a running task uses its own setup's)."""
        return self.setup.model_for(agent)

    def reconfigure(self, settings: Settings) -> None:
        """Run the next tasks with `settings` (the user changed theirs); a running task keeps
        the setup it started with."""
        self.setup = ModelSetup.of(settings, self.stream_log)

    def delete_conversation(self, conversation_id: str) -> None:
        """Delete a conversation and what is kept for it: its history, its undo journals, its
        task memory, its pending proposals, its sandbox session and its processes' records
        (raises ConversationNotFound). The caller makes sure no task of it runs."""
        self.store.get(conversation_id)
        sessions = sessions_of(self.runner)
        if sessions is not None:  # its processes end, their logs go
            sessions.delete(conversation_id)
        self.store.delete(conversation_id)
        self.journal.forget(conversation_id)
        self.memory.forget(conversation_id)
        for proposal in self.proposals.pending(conversation_id):
            self.proposals.discard_proposal(proposal.id)

    def warm_up(self) -> None:
        """Get ready for the first task rather than at its start: the undo baseline, the model
        client (the `openai` SDK is imported then) and the sandbox (the Docker engine asked).
        A server does it as it starts listening (before, in eventlet mode), the interactive
        CLI while the first prompt is typed; `cli -p` does none of it ahead."""
        self.journal.start_baseline()  # a child keeps the workspace for undo meanwhile
        self.warm_model()
        _ = self.runner.kind

    def warm_model(self) -> None:
        """Build the model client now rather than at the first call (the `openai` SDK is
        imported then); a problem is left to that call."""
        if isinstance(self.model, ApiClient):
            self.model.warm()

    def mcp_servers(self) -> McpManager:
        """The MCP servers, made now (empty, their code loaded) when no file named any at start,
        for a server added while the program runs."""
        if self.mcp is None:
            from modules.mcp.client import build_manager

            self.mcp = build_manager(self.settings)
            self.tools.add_source(self.mcp)
            self.mcp.start()
        return self.mcp

    def close(self) -> None:
        """Release what outlives a task: the sandbox's containers, the MCP servers, the undo
        baseline's child; the deltas still queued for debug_stream.log are written."""
        self.runner.close()
        self.journal.close()
        if self.mcp is not None:
            self.mcp.close()
        if self.stream_log is not None:
            self.stream_log.close()


def build_services(settings: Settings, ends_with_run: bool = False) -> AgentServices:
    """Wire the real implementations together, logging to the data dir (`ends_with_run`:
    `cli -p`, whose sandbox sessions end when its one task does)."""
    prepare_workspace(settings.workspace, create=True)  # the fronts checked it as asked
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    logs = settings.data_dir / "logs"
    stream_log = setup_logging(logs, redact_content=settings.log_redact_content)
    workspace = Workspace(settings.workspace)
    journal = UndoJournal(settings.data_dir, workspace, floor=Floor.of(settings))
    agents = load_agents(
        [SHIPPED_AGENTS, settings.data_dir / "agents"],
        settings.workspace,
        None if settings.trust_workspace_agents else settings,
    )
    for problem in agents.problems:
        log.warning(
            "an agent definition did not load",
            extra={"fields": {"path": problem.path, "error": problem.message}},
        )
    tools = build_registry()
    mcp = _mcp_servers(settings)
    if mcp is not None:
        tools.add_source(mcp)
        mcp.start()  # in the background: a slow or broken server never delays start-up
    if settings.remote_agents:  # call_agent exists only when there is someone to call
        from modules.tools.remote_agents import RemoteAgents  # not on the start-up path otherwise

        tools.add_source(RemoteAgents(settings.remote_agents))
    return AgentServices(
        setup=ModelSetup.of(settings, stream_log),
        tools=tools,
        store=ConversationStore(settings.data_dir),
        workspace=workspace,
        runner=runner_for(settings, ends_with_run),
        memory=MemoryStore(settings.data_dir),
        annotations=AnnotationStore(settings.data_dir),
        journal=journal,
        proposals=ProposalStore(settings.data_dir, workspace, journal),
        agents=agents,
        skills=SkillCatalog(skill_folders(settings)),
        attachments=AttachmentStore.from_settings(settings, workspace),
        stream_log=stream_log,
        mcp=mcp,
    )


def _mcp_servers(settings: Settings) -> McpManager | None:
    """The MCP servers, when a configuration file exists (only then is their code loaded)."""
    if not any(path.is_file() for path in settings.mcp_files()):
        return None
    from modules.mcp.client import build_manager

    return build_manager(settings)
