"""The read answers both fronts of the web server give: Socket.IO acks and HTTP JSON alike."""

from __future__ import annotations

from typing import Any

from modules.file_tree import file_tree
from web_state import WebState


def public_record(record: dict[str, Any]) -> dict[str, Any]:
    """A message record as PROTOCOL §5 gives it, without in-memory helpers."""
    return {k: v for k, v in record.items() if not k.startswith("_")}


def conversations_payload(state: WebState) -> dict[str, Any]:
    """The `list_conversations` answer, also served at /api/conversations."""
    keys = ("id", "title", "created_at", "updated_at")
    return {
        "ok": True,
        "conversations": [{k: m.get(k) for k in keys} for m in state.services.store.list()],
    }


def conversation_payload(state: WebState, conversation_id: str) -> dict[str, Any]:
    """The `get_conversation` answer (raises ConversationNotFound).

    `seq` is what the messages cover: join with `after_seq: seq` for exactly the rest.
    """
    terminal = state.hub.get(conversation_id)
    records, seq = terminal.snapshot()
    return {
        "ok": True,
        "conversation": terminal.conversation.meta if terminal.conversation else {},
        "messages": [public_record(r) for r in records],
        "seq": seq,
        "running": terminal.running,
        "undoable": state.services.journal.undoable(conversation_id),
    }


def tree_payload(state: WebState) -> dict[str, Any]:
    """The `get_file_tree` answer, also served at /api/tree."""
    services = state.services
    return {"ok": True, "tree": file_tree(services.workspace, services.annotations)}


def status_payload(state: WebState) -> dict[str, Any]:
    """The `get_status` answer (PROTOCOL §4), plus whether the model API is configured."""
    provider, settings, runner = state.services.provider, state.settings, state.services.runner
    return {
        "ok": True,
        "provider": provider.name,
        "model": provider.model,
        "mode": settings.mode,
        "approval": settings.approval,
        "async_mode": state.async_mode,
        "sandbox": {"kind": runner.kind, "isolation": list(runner.isolation)},
        "agent": settings.default_agent,
        "agents": state.services.agents.summaries(),
        "agent_problems": [vars(p) for p in state.services.agents.problems],
        "skills": state.services.skills.summaries(),
        "api": {
            "configured": provider.configured,
            "key_env": provider.key_env,
            "base_url": provider.base_url,
            "message": provider.problem,
        },
    }
