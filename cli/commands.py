"""What the local terminal's slash commands do where the remote one's differ (the table of them
is cli/slash_commands.py, their texts cli/command_texts.py): each takes the terminal and the
command's argument, returns what to print."""

from __future__ import annotations

from cli.command_texts import agents_text, mcp_text, skills_text
from cli.history import find_conversation, listing
from cli.slash_commands import commands_of
from cli.terminal import CliTerminal
from cli.undo import undo_command
from core.main_terminal import NothingToCondense
from core.spend import conversation_totals, spend_text, today_totals


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


COMMANDS = commands_of(
    "local",
    {
        "status": _status,
        "new": _new,
        "history": _history,
        "memory": _memory,
        "undo": undo_command,
        "agents": _agents,
        "agent": _agent,
        "skills": _skills,
        "mcp": _mcp,
        "compact": _compact,
    },
)
