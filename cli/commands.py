"""What the local terminal's slash commands do where the remote one's differ (the table of them
is cli/slash_commands.py, their texts cli/command_texts.py): each takes the terminal and the
command's argument, returns what to print."""

from __future__ import annotations

from dataclasses import asdict

from cli.command_texts import agents_text, mcp_text, skills_text, tools_off_text
from cli.diff_command import local_diff
from cli.export_command import local_export
from cli.history import find_conversation, listing
from cli.process_texts import (
    LOG_TAIL_BYTES,
    find,
    logs_text,
    process_id,
    process_line,
    ps_text,
    tail_offset,
)
from cli.slash_commands import commands_of
from cli.terminal import CliTerminal
from cli.undo import undo_command
from core.main_terminal import NothingToCondense
from core.spend import conversation_totals, spend_text, today_totals
from modules.sandbox.factory import network_of, sessions_of
from modules.sandbox.session.background import UnknownProcess
from modules.sandbox.session.pool import SessionPool
from modules.sandbox.session.process import ProcessInfo
from modules.sandbox.session.records import ProcessRecord
from modules.sandbox.session.session import SandboxSession
from modules.tools.catalogue import tools_off
from protocol.processes import BackgroundProcess, ProcessOutput


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
        f"{tools_off_text(tools_off(t.settings))}"
        f"sandbox {runner.kind} · network {network_of(runner)}:{isolation}"
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


def _sessions(t: CliTerminal) -> tuple[SessionPool, str]:
    """The sandbox sessions and the open conversation; ValueError when either is missing."""
    pool = sessions_of(t.services.runner)
    if pool is None:
        kind = t.services.runner.kind
        raise ValueError(f"this terminal's sandbox ({kind}) keeps no background processes")
    if t.conversation_id is None:
        raise ValueError("no conversation yet: send a message, or open one with /history")
    return pool, t.conversation_id


def _typed(record: ProcessRecord, info: ProcessInfo | None = None) -> BackgroundProcess:
    wire = {**asdict(record), "running": record.running}
    if info is not None:
        wire |= {"ports": list(info.ports), "output_end": info.output_end}
    return BackgroundProcess.from_wire(wire)


def _live(t: CliTerminal, arg: str, command: str) -> tuple[SandboxSession, BackgroundProcess]:
    """The conversation's session and the process of `/command ID`."""
    pool, cid = _sessions(t)
    wanted = process_id(arg, command)
    session = pool.existing(cid)
    if session is None:
        raise ValueError(f"{wanted} is not running in this terminal (/ps lists them)")
    return session, find([_typed(i.record, i) for i in session.processes()], wanted)


def _ps(t: CliTerminal, _: str) -> str:
    pool, cid = _sessions(t)
    session = pool.existing(cid)
    if session is not None:
        return ps_text([_typed(i.record, i) for i in session.processes()])
    return ps_text([_typed(r) for r in pool.history(cid)])


def _logs(t: CliTerminal, arg: str) -> str:
    session, process = _live(t, arg, "logs")
    try:
        out = session.peek(process.id, tail_offset(process), LOG_TAIL_BYTES)
    except UnknownProcess as exc:
        raise ValueError(str(exc)) from None
    typed = ProcessOutput(
        text=out.text,
        offset=out.offset + out.skipped,
        skipped=out.skipped,
        next_offset=out.next_offset,
        output_end=out.info.output_end,
        running=out.info.record.running,
        exit_code=out.info.record.exit_code,
    )
    return logs_text(process, typed)


def _stop(t: CliTerminal, arg: str) -> str:
    session, process = _live(t, arg, "stop")
    try:
        info = session.stop(process.id)
    except UnknownProcess as exc:
        raise ValueError(str(exc)) from None
    return process_line(_typed(info.record, info))


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
        "diff": local_diff,
        "export": local_export,
        "ps": _ps,
        "logs": _logs,
        "stop": _stop,
    },
)
