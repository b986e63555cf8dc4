"""The local terminal's slash commands (names and texts shared with the remote one through
cli/command_texts.py): each takes the terminal and the command's argument, returns what to print."""

from __future__ import annotations

from pathlib import Path

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
from cli.history import find_conversation, listing
from cli.terminal import CliTerminal
from cli.undo import undo_command
from core.main_terminal import NothingToCondense
from core.spend import conversation_totals, spend_text, today_totals
from modules.results import ToolError
from protocol.options import MAX_ATTACHMENTS


def _status(t: CliTerminal, _: str) -> str:
    p, usage = t.services.provider, t.context_usage
    focus = ", ".join(t.focus.paths()) or "none"
    runner = t.services.runner
    isolation = "".join(f"\n  {line}" for line in runner.isolation)
    return (
        f"agent {t.agent} · provider {p.name} · model {p.model} · mode {t.mode} · "
        f"approval {t.approval}\n"
        f"conversation {t.conversation_id or '(new)'} · iteration {t.iteration}\n"
        f"context {usage.used_tokens:,} / {usage.limit_tokens:,} tokens · focus: {focus}\n"
        f"{_spend_lines(t)}"
        f"sandbox {runner.kind}:{isolation}"
    )


def _spend_lines(t: CliTerminal) -> str:
    """The running task's, the conversation's and today's tokens and cost, a line each."""
    lines = []
    task = t.task
    if task is not None and task.spend is not None:
        totals = task.spend.totals
        lines.append(f"task {spend_text(totals.usage, totals.cost)}")
    conversation = t.conversation
    if conversation is not None:
        totals = conversation_totals(conversation)
        lines.append(f"conversation {spend_text(totals.usage, totals.cost)}")
    today = today_totals(t.settings.data_dir)
    lines.append(f"today {spend_text(today.usage, today.cost)}")
    return "".join(line + "\n" for line in lines)


def _mode(t: CliTerminal, arg: str) -> str:
    t.mode = choice(arg, ("fast", "thinking"), "mode")  # type: ignore[assignment]
    return f"mode: {t.mode}"


def _approval(t: CliTerminal, arg: str) -> str:
    verb, _, name = arg.partition(" ")
    if verb == "revoke":
        if not name.strip():
            raise ValueError("usage: /approval revoke NAME (/approval lists them)")
        if not t.gate.revoke(name.strip()):
            raise ValueError(f"{name.strip()} is not always allowed (/approval lists them)")
        return f"{name.strip()} asks again before it runs"
    if arg:
        t.approval = choice(arg, APPROVAL_MODES, "approval")  # type: ignore[assignment]
    allowed = ", ".join(t.gate.allowed()) or "none"
    return (
        f"approval: {t.approval} ({APPROVAL_MEANING[t.approval]})\n"
        f"always allowed in this session: {allowed}"
        + ("\n/approval revoke NAME asks again before one" if allowed != "none" else "")
    )


def _new(t: CliTerminal, _: str) -> str:
    t.new_conversation()
    return "new conversation"


def _history(t: CliTerminal, arg: str) -> str:
    store = t.services.store
    if arg:
        conversation_id = find_conversation(store, arg, t.listed)
        t.open_conversation(conversation_id)
        conversation = t.conversation
        assert conversation is not None
        title = conversation.meta.get("title") or "(untitled)"
        return (
            f"opened {conversation_id} ({title}): {len(conversation.path())} messages on this "
            f"branch · agent {t.agent}, mode {t.mode}, approval {t.approval}"
        )
    text, t.listed = listing(store)
    return text


def _focus(t: CliTerminal, arg: str) -> str:
    return f"focus: {', '.join(t.set_focus(arg, True))}"


def _unfocus(t: CliTerminal, arg: str) -> str:
    return f"focus: {', '.join(t.set_focus(arg, False)) or 'none'}"


def _memory(t: CliTerminal, _: str) -> str:
    memory, cid = t.services.memory, t.conversation_id or ""
    main = memory.read("main", cid) or "(empty)"
    task = memory.read("task", cid) if cid else ""
    return f"main memory:\n{main}\n\nthis conversation's memory:\n{task or '(empty)'}"


def _compact(t: CliTerminal, arg: str) -> str:
    try:
        return t.compact_foreground(arg)
    except NothingToCondense as exc:
        return str(exc)


def _agents(t: CliTerminal, _: str) -> str:
    catalog = t.services.agents
    problems = [(p.path, p.message) for p in catalog.problems]
    return agents_text(catalog.summaries(), problems, t.agent)


def _agent(t: CliTerminal, arg: str) -> str:
    if not arg:
        return f"agent: {t.agent} (/agents lists them)"
    t.agent = t.services.agents.get(arg).name
    return f"agent: {t.agent}"


def _skills(t: CliTerminal, _: str) -> str:
    return skills_text(t.services.skills.summaries())


def _mcp(t: CliTerminal, arg: str) -> str:
    mcp = t.services.mcp
    if arg.startswith("restart"):
        name = arg.removeprefix("restart").strip()
        if mcp is None or name not in mcp.servers:
            raise ValueError(f"no MCP server {name!r}; /mcp lists them")
        mcp.restart(name)
        return f"restarting {name}; /mcp shows when it is connected"
    status = mcp.status() if mcp else {"servers": [], "problems": []}
    return mcp_text(status, str(t.settings.mcp_config or t.settings.data_dir / "mcp.json"))


def _attach(t: CliTerminal, arg: str) -> str:
    if not arg:
        return "\n".join(f"  {a.path} ({a.label()})" for a in t.attachments) or (
            "no files attached; /attach PATH sends one with your next message"
        )
    if len(t.attachments) >= MAX_ATTACHMENTS:
        raise ValueError(f"at most {MAX_ATTACHMENTS} files go with one message")
    store, workspace = t.services.attachments, t.services.workspace
    try:
        rel: str | None = workspace.relative(workspace.resolve(arg))
    except ToolError:
        rel = None
    outside = Path(arg).expanduser()
    if rel is not None and workspace.lstat(rel, follow=True) is not None:
        [attachment] = store.attach([rel])
    elif outside.is_file():
        attachment = store.import_file(outside)
    else:
        raise ValueError(f"no such file: {arg}")
    t.attachments.append(attachment)
    return f"attached {attachment.path} ({attachment.label()}); it goes with your next message"


def _detach(t: CliTerminal, _: str) -> str:
    dropped, t.attachments = len(t.attachments), []
    return f"{dropped} attached file{'' if dropped == 1 else 's'} dropped"


COMMANDS = {
    "status": _status,
    "continue": continue_command,
    "mode": _mode,
    "approval": _approval,
    "new": _new,
    "history": _history,
    "focus": _focus,
    "unfocus": _unfocus,
    "memory": _memory,
    "undo": undo_command,
    "agents": _agents,
    "agent": _agent,
    "skills": _skills,
    "mcp": _mcp,
    "compact": _compact,
    "attach": _attach,
    "detach": _detach,
    "help": lambda t, a: HELP,
}
