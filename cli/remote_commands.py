"""The remote terminal's slash commands: the local session's names, texts and usage
(cli/command_texts.py), carried out through the server's ops (docs/protocol.md §4.1)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cli.budget import continue_command
from cli.command_texts import (
    APPROVAL_MEANING,
    APPROVAL_MODES,
    HELP,
    agents_text,
    choice,
    mcp_text,
    skills_text,
)
from cli.history import format_listing
from cli.painter import DIM
from cli.remote_terminal import RemoteTerminal
from cli.undo import undo_dialog
from core.spend import spend_text
from history.store import ConversationNotFound
from modules.undo.restore import Conflict, UndoPreview, UndoResult
from protocol.events import done_from_wire
from protocol.options import MAX_ATTACHMENTS, MAX_FOCUS
from workspace_client import WorkspaceError


def _needs_conversation(t: RemoteTerminal) -> str:
    if t.conversation_id is None:
        raise ValueError("no conversation yet: send a message, or open one with /history")
    return t.conversation_id


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
    sandbox = status["sandbox"]
    lines.append(f"sandbox {sandbox['kind']}:" + "".join(f"\n  {x}" for x in sandbox["isolation"]))
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


def _mode(t: RemoteTerminal, arg: str) -> str:
    t.mode = choice(arg, ("fast", "thinking"), "mode")
    return f"mode: {t.mode}"


def _approval(t: RemoteTerminal, arg: str) -> str:
    verb, _, name = arg.partition(" ")
    if verb == "revoke":
        if not name.strip():
            raise ValueError("usage: /approval revoke NAME (/approval lists them)")
        payload = {"conversation_id": _needs_conversation(t), "tool": name.strip()}
        try:
            t.client.call("revoke_approval", payload)
        except WorkspaceError as exc:
            if exc.code != "not_found":
                raise
            why = f"{name.strip()} is not always allowed (/approval lists them)"
            raise ValueError(why) from None
        return f"{name.strip()} asks again before it runs"
    if arg:
        t.approval = choice(arg, APPROVAL_MODES, "approval")
    status = t.client.status(t.conversation_id)
    approval = t.approval or status["approval"]
    allowed = ", ".join(status.get("always_allowed") or []) or "none"
    return (
        f"approval: {approval} ({APPROVAL_MEANING[approval]})\n"
        f"always allowed in this conversation: {allowed}"
        + ("\n/approval revoke NAME asks again before one" if allowed != "none" else "")
    )


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


def _set_focus(t: RemoteTerminal, path: str, on: bool) -> list[str]:
    if not path:
        raise ValueError(f"usage: /{'focus' if on else 'unfocus'} PATH")
    if t.conversation_id is not None:
        op = "focus_file" if on else "unfocus_file"
        ack = t.client.call(op, {"conversation_id": t.conversation_id, "path": path})
        return list(ack["focus"])
    if on and path not in t.focus:
        if len(t.focus) >= MAX_FOCUS:
            raise ValueError(f"at most {MAX_FOCUS} files are in focus")
        t.client.read_file(path)  # not_found for a path that is no workspace file
        t.focus.append(path)
    elif not on:
        if path not in t.focus:
            raise ValueError(f"{path} is not in focus")
        t.focus.remove(path)
    return list(t.focus)


def _focus(t: RemoteTerminal, arg: str) -> str:
    return f"focus: {', '.join(_set_focus(t, arg, True))}"


def _unfocus(t: RemoteTerminal, arg: str) -> str:
    return f"focus: {', '.join(_set_focus(t, arg, False)) or 'none'}"


def _memory(t: RemoteTerminal, _: str) -> str:
    payload = {} if t.conversation_id is None else {"conversation_id": t.conversation_id}
    ack = t.client.call("get_memory", payload)
    return (
        f"main memory:\n{ack['main'] or '(empty)'}\n\n"
        f"this conversation's memory:\n{ack['task'] or '(empty)'}"
    )


def _undo(t: RemoteTerminal, arg: str) -> str:
    cid = _needs_conversation(t)

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
    payload: dict[str, Any] = {"conversation_id": _needs_conversation(t)}
    if arg:
        payload["instructions"] = arg
    t.client.call("compact", payload)
    return "the server summarises the older turns now; /status shows the context after"


def _attach(t: RemoteTerminal, arg: str) -> str:
    if not arg:
        return "\n".join(f"  {path}" for path in t.attachments) or (
            "no files attached; /attach PATH sends one with your next message"
        )
    if len(t.attachments) >= MAX_ATTACHMENTS:
        raise ValueError(f"at most {MAX_ATTACHMENTS} files go with one message")
    local = Path(arg).expanduser()
    if local.is_file():  # a file of this machine: uploaded into the workspace's uploads/
        path = str(t.client.upload(local)["path"])
    else:
        try:
            path = str(t.client.read_file(arg)["path"])
        except WorkspaceError:
            raise ValueError(f"no such file here or in the server's workspace: {arg}") from None
    t.attachments.append(path)
    return f"attached {path}; it goes with your next message"


def _detach(t: RemoteTerminal, _: str) -> str:
    dropped, t.attachments = len(t.attachments), []
    return f"{dropped} attached file{'' if dropped == 1 else 's'} dropped"


Handler = Callable[[RemoteTerminal, str], str]


def _refusals_said(handler: Handler) -> Handler:
    """A command the server refuses prints its code and message, as a local refusal does."""

    @functools.wraps(handler)
    def run(t: RemoteTerminal, arg: str) -> str:
        try:
            return handler(t, arg)
        except (WorkspaceError, ConversationNotFound) as exc:
            raise ValueError(str(exc)) from None

    return run


COMMANDS: dict[str, Handler] = {
    name: _refusals_said(handler)
    for name, handler in {
        "status": _status,
        "continue": continue_command,
        "mode": _mode,
        "approval": _approval,
        "new": _new,
        "history": _history,
        "focus": _focus,
        "unfocus": _unfocus,
        "memory": _memory,
        "undo": _undo,
        "agents": _agents,
        "agent": _agent,
        "skills": _skills,
        "mcp": _mcp,
        "compact": _compact,
        "attach": _attach,
        "detach": _detach,
        "help": lambda t, a: HELP,
    }.items()
}
