"""The read answers both fronts of the web server give: Socket.IO acks and HTTP JSON alike."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from core.spend import Totals, conversation_totals, today_totals
from core.web_terminal import WebTerminal
from history.message_record import public_record
from model.demo_scripts import demo_suggestions
from modules.sandbox.factory import network_of, sessions_of
from modules.tools.catalogue import tools_off
from modules.workspace.file_tree import file_tree
from modules.workspace.folder import read_only_warning
from utils.settings import Settings
from web.demo_sample import demo_sample
from web.state import WebState


def conversations_payload(state: WebState, query: str | None = None) -> dict[str, Any]:
    """The `list_conversations` answer, also served at /api/conversations; with a `query`,
    only the conversations whose title or messages hold it, each with a `snippet`. `tasks`
    tells apart conversations of the same title."""
    store = state.services.store
    keys: tuple[str, ...] = ("id", "title", "created_at", "updated_at")
    if query and query.strip():
        metas: list[Mapping[str, Any]] = list(store.search(query))
        keys = (*keys, "snippet", "snippet_parts")
    else:
        metas = list(store.list())
    found = [{**{k: m.get(k) for k in keys}, "tasks": _task_count(m)} for m in metas]
    return {"ok": True, "conversations": found, "running": state.hub.running_ids()}


def _task_count(meta: Mapping[str, Any]) -> int:
    """How many tasks have ended in a conversation (one a message answered), from meta.json."""
    ends = (meta.get("meta") or {}).get("task_ends")
    return len(ends) if isinstance(ends, dict) else 0


def conversation_payload(state: WebState, conversation_id: str) -> dict[str, Any]:
    """The `get_conversation` answer (raises ConversationNotFound).

    `seq` is what the messages cover: join with `after_seq: seq` for exactly the rest.
    """
    terminal = state.hub.get(conversation_id)
    records, seq = terminal.snapshot()
    status = terminal.task_status()
    if status is None and (status := state.hub.remote_status(conversation_id)) is not None:
        # Another process runs the task: what streams after its newest record, it replays.
        seq = int(records[-1].get("seq") or 0) if records else seq
    return {
        "ok": True,
        "conversation": terminal.conversation.meta if terminal.conversation else {},
        "messages": [public_record(r) for r in records],
        "seq": seq,
        "running": status is not None,
        "undoable": state.services.journal.undoable(conversation_id),
        **_settings_of(terminal),
        **({"status": status} if status is not None else {}),
        "spend": spend_payload(state, terminal),
    }


def spend_payload(state: WebState, terminal: WebTerminal) -> dict[str, Any]:
    """The conversation's finished tasks' and today's (every conversation's) tokens and cost."""
    conversation = terminal.conversation
    ended = conversation_totals(conversation) if conversation is not None else Totals()
    return {
        "conversation": ended.to_wire(),
        "today": today_totals(state.services.settings.data_dir).to_wire(),
    }


def _settings_of(terminal: WebTerminal) -> dict[str, Any]:
    """What the conversation's next task runs with."""
    found: dict[str, Any] = {
        "mode": terminal.mode,
        "approval": terminal.approval,
        "agent": terminal.agent,
        "focus": terminal.focus.paths(),
        "context_limit": terminal.context_usage.limit_tokens,
    }
    return found


def tree_payload(state: WebState) -> dict[str, Any]:
    """The `get_file_tree` answer, also served at /api/tree; once the watcher ended, with why
    this tree will not follow changes."""
    services, stopped = state.services, state.tree_stopped
    tree = file_tree(services.workspace, services.annotations)
    return {"ok": True, "tree": tree, **({"live_stopped": stopped} if stopped else {})}


def status_payload(state: WebState, conversation_id: str | None = None) -> dict[str, Any]:
    """The `get_status` answer (docs/protocol.md §4), plus whether the model API is configured and,
    given a conversation, the tools always allowed there (raises ConversationNotFound)."""
    services = state.services
    provider, settings, runner = services.provider, services.settings, services.runner
    allowed = state.hub.get(conversation_id).gate.allowed() if conversation_id else None
    return {
        **({"always_allowed": allowed} if allowed is not None else {}),
        "ok": True,
        "provider": provider.name,
        "model": provider.model,
        "mode": settings.mode,
        "approval": settings.approval,
        "async_mode": state.async_mode,
        "workspace_warning": read_only_warning(settings.workspace),
        "sandbox": {
            "kind": runner.kind,
            "isolation": list(runner.isolation),
            "sessions": sessions_of(runner) is not None,
            "network": network_of(runner),
        },
        "agent": settings.default_agent,
        "agents": state.services.agents.summaries(),
        "agent_problems": [vars(p) for p in state.services.agents.problems],
        "skills": state.services.skills.summaries(),
        "mcp": mcp.status() if (mcp := state.services.mcp) else no_mcp_servers(settings),
        "tools_off": tools_off(settings),
        "demo": provider.name == "demo",
        "demo_suggestions": demo_suggestions() if provider.name == "demo" else [],
        "demo_reset": provider.name == "demo" and demo_sample(state).available,
        "api": {
            "configured": provider.configured,
            "key_env": provider.key_env,
            "base_url": provider.base_url,
            "message": provider.problem,
        },
    }


def no_mcp_servers(settings: Settings) -> dict[str, Any]:
    """`get_status.mcp` before any server is configured: where one added will be written."""
    return {"servers": [], "problems": [], "config": str(settings.mcp_files()[0])}
