"""What the remote terminal's slash commands do where the local one's differ (the table of them
is cli/slash_commands.py, their texts cli/command_texts.py), through the server's ops
(docs/protocol.md §4.1)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from cli.command_texts import agents_text, mcp_text, skills_text, tools_off_text
from cli.diff_command import remote_diff
from cli.export_command import remote_export
from cli.history import format_listing
from cli.painter import DIM
from cli.process_texts import find, logs_text, process_id, process_line, ps_text, tail_offset
from cli.remote_terminal import RemoteTerminal
from cli.slash_commands import commands_of
from cli.undo import undo_dialog
from core.spend import spend_text
from modules.undo.restore import Conflict, UndoPreview, UndoResult
from protocol.events import done_from_wire
from workspace_client import WorkspaceError


def _status(t: RemoteTerminal, _: str) -> str:
    status = t.client.status(t.conversation_id)
    lines = [
        f"agent {t.agent or status['agent']} · provider {status['provider']} · model "
        f"{status['model']} · mode {t.mode or status['mode']} · approval "
        f"{t.approval or status['approval']}",
        f"server {t.client.url} · conversation {t.conversation_id or '(new)'} · iteration "
        f"{t.iteration}",
    ]
    if t.conversation_id is not None:
        conversation = t.client.get_conversation(t.conversation_id)
        used = _context_used(conversation)
        focus = ", ".join(conversation["focus"]) or "none"
        lines.append(
            f"context {used:,} / {conversation['context_limit']:,} tokens · focus: {focus}"
        )
        for scope in ("conversation", "today"):
            spent = done_from_wire({"reason": "complete", "usage": conversation["spend"][scope]})
            lines.append(f"{scope} {spend_text(spent.usage, spent.cost)}")
    if off := tools_off_text(status.get("tools_off", {})):
        lines.append(off.rstrip("\n"))
    sandbox = status["sandbox"]
    network = f" · network {sandbox['network']}" if "network" in sandbox else ""
    lines.append(
        f"sandbox {sandbox['kind']}{network}:" + "".join(f"\n  {x}" for x in sandbox["isolation"])
    )
    return "\n".join(lines)


def _context_used(conversation: dict[str, Any]) -> int:
    """The tokens the conversation's next model call sees, as the page's meter shows them: the
    running task's latest `status`; else the last model call's on the newest branch (its prompt
    and its answer), or what a summary made after it left."""
    status = conversation.get("status")
    if conversation["running"] and status:
        return int(status["context"]["used_tokens"])
    records = {record["id"]: record for record in conversation["messages"]}
    record = conversation["messages"][-1] if conversation["messages"] else None
    while record is not None:
        meta = record.get("meta") or {}
        summary = meta.get("summary") if record["role"] == "system" else None
        if isinstance(summary, dict) and "first_kept_id" in summary:
            return int(summary["tokens_after"])
        if record["role"] == "assistant" and meta.get("usage"):
            usage = meta["usage"]
            return int(usage.get("prompt_tokens", 0)) + int(usage.get("completion_tokens", 0))
        record = records.get(record.get("parent_id") or "")
    return 0


def _new(t: RemoteTerminal, _: str) -> str:
    t.conversation_id, t.focus, t.attachments, t.iteration = None, [], [], 0
    return "new conversation"


def _history(t: RemoteTerminal, arg: str) -> str:
    if not arg:
        text, t.listed = format_listing(t.client.conversations())
        return text
    conversation = t.open(t.find(arg))
    title = conversation["conversation"].get("title") or "(untitled)"
    t.out.write(
        f"opened {t.conversation_id} ({title}): {len(conversation['messages'])} messages · "
        f"agent {t.agent}, mode {t.mode}, approval {t.approval}\n"
    )
    if not conversation["running"]:
        return ""
    t.out.write(t.printer.paint("a task runs in it: its stream follows (Ctrl-C stops it)", DIM))
    t.out.write("\n")
    assert t.conversation_id is not None
    t.watch(t.conversation_id)
    return ""


def _memory(t: RemoteTerminal, _: str) -> str:
    payload = {} if t.conversation_id is None else {"conversation_id": t.conversation_id}
    ack = t.client.call("get_memory", payload)
    return (
        f"main memory:\n{ack['main'] or '(empty)'}\n\n"
        f"this conversation's memory:\n{ack['task'] or '(empty)'}"
    )


def _undo(t: RemoteTerminal, arg: str) -> str:
    cid = t.needs_conversation()

    def preview_of(message_id: str | None) -> UndoPreview:
        payload = {"conversation_id": cid} | ({"message_id": message_id} if message_id else {})
        ack = t.client.call("undo_preview", payload)
        return UndoPreview(
            task_id=ack["message_id"],
            files=[(f["path"], f["action"]) for f in ack["files"]],
            undone=ack["undone"],
            conflicts=[_conflict(c) for c in ack["conflicts"]],
        )

    def undo(message_id: str | None, overwrite: bool) -> UndoResult:
        task_id = message_id or preview_of(None).task_id
        ack = t.client.undo(cid, task_id, overwrite=overwrite or None)
        return UndoResult(
            task_id=task_id,
            restored=ack["restored"],
            removed=ack["removed"],
            skipped=ack["skipped"],
            message=ack["message"],
            conflicts=[_conflict(c) for c in ack["conflicts"]],
        )

    return undo_dialog(t.out, t.stdin, arg, preview_of, undo)


def _conflict(wire: dict[str, Any]) -> Conflict:
    return Conflict(wire["path"], wire["action"], wire["reason"], wire.get("later_message_id"))


def _agents(t: RemoteTerminal, _: str) -> str:
    status = t.client.status()
    problems = [(p["path"], p["message"]) for p in status["agent_problems"]]
    return agents_text(status["agents"], problems, t.agent or status["agent"])


def _agent(t: RemoteTerminal, arg: str) -> str:
    status = t.client.status()
    if not arg:
        return f"agent: {t.agent or status['agent']} (/agents lists them)"
    if arg not in {a["name"] for a in status["agents"]}:
        raise ValueError(f"no agent {arg!r} (/agents lists them)")
    t.agent = arg
    return f"agent: {t.agent}"


def _skills(t: RemoteTerminal, _: str) -> str:
    return skills_text(t.client.status()["skills"])


def _mcp(t: RemoteTerminal, arg: str) -> str:
    if arg.startswith("restart"):
        name = arg.removeprefix("restart").strip()
        try:
            t.client.call("mcp_restart_server", {"name": name})
        except WorkspaceError as exc:
            if exc.code != "not_found":
                raise
            raise ValueError(f"no MCP server {name!r}; /mcp lists them") from None
        return f"restarting {name}; /mcp shows when it is connected"
    status = t.client.status()["mcp"]
    return mcp_text(status, str(status.get("config") or "the server's DATA_DIR/mcp.json"))


def _compact(t: RemoteTerminal, arg: str) -> str:
    payload: dict[str, Any] = {"conversation_id": t.needs_conversation()}
    if arg:
        payload["instructions"] = arg
    t.client.call("compact", payload)
    return "the server summarises the older turns now; /status shows the context after"


def _ps(t: RemoteTerminal, _: str) -> str:
    return ps_text(t.client.list_processes(t.needs_conversation()))


def _logs(t: RemoteTerminal, arg: str) -> str:
    cid, wanted = t.needs_conversation(), process_id(arg, "logs")
    process = find(t.client.list_processes(cid), wanted)
    return logs_text(process, t.client.process_output(cid, wanted, tail_offset(process)))


def _stop(t: RemoteTerminal, arg: str) -> str:
    cid, wanted = t.needs_conversation(), process_id(arg, "stop")
    return process_line(t.client.stop_process(cid, wanted))


Handler = Callable[[RemoteTerminal, str], str]


def _refusals_said(handler: Handler) -> Handler:
    """A command the server refuses prints its code and message, as a local refusal does."""

    @functools.wraps(handler)
    def run(t: RemoteTerminal, arg: str) -> str:
        try:
            return handler(t, arg)
        except WorkspaceError as exc:
            raise ValueError(str(exc)) from None

    return run


COMMANDS: dict[str, Handler] = {
    name: _refusals_said(handler)
    for name, handler in commands_of(
        "remote",
        {
            "status": _status,
            "new": _new,
            "history": _history,
            "memory": _memory,
            "undo": _undo,
            "agents": _agents,
            "agent": _agent,
            "skills": _skills,
            "mcp": _mcp,
            "compact": _compact,
            "diff": remote_diff,
            "export": remote_export,
            "ps": _ps,
            "logs": _logs,
            "stop": _stop,
        },
    ).items()
}
