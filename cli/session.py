"""The terminal session: `-p` runs one task; the interactive loop reads prompts and the slash
commands in HELP (`/status`, `/undo`, `/mcp`, ...)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, TextIO, TypeVar

from cli.budget import continue_command
from cli.history import find_conversation, listing
from cli.printer import BOLD, YELLOW
from cli.terminal import CliTerminal
from cli.undo import undo_command
from core.events import DoneReason
from core.main_terminal import NotConfigured, NothingToCondense, TaskBusy
from core.spend import conversation_totals, spend_text, today_totals
from history.store import ConversationNotFound
from modules.results import ToolError
from modules.uploads.attachments import MAX_ATTACHMENTS
from utils.disk import DiskFull

EXIT_CODES: dict[DoneReason, int] = {
    "complete": 0,
    "error": 1,
    "max_iterations": 3,
    "cancelled": 130,
    "budget": 5,
    "loop": 6,
    "interrupted": 1,  # the server stopped while the task ran (cli --server)
}
EXIT_DECLINED = 4  # `-p`: the task ended, but without an action it needed

HELP = """\
/status                 model, mode, approval, iteration, context used/limit, focus files
/mode fast|thinking     switch the thinking policy
/approval [MODE]        show the approval mode and the always-allowed tools, or set
                        the mode: auto|ask|read-only
/approval revoke NAME   ask again before the tool NAME (allowed "always" earlier)
/continue [--raise LIMIT]  go on where the last task stopped; after a budget stopped it,
                        --raise gives that budget a higher LIMIT for this task only
/new                    start a new conversation
/history [N|ID]         list recent conversations, numbered; open one by its number
                        or its id (the first characters only it starts with do)
/focus PATH             keep a file's current content in every model call (at most 3)
/unfocus PATH           stop doing so
/attach [PATH]          send a file (PDF, DOCX, XLSX, PPTX, CSV, text, image) with the next
                        message: a workspace path, or one outside that is copied into uploads/;
                        no PATH lists them; /detach drops them
/memory                 show the main and this conversation's memory
/compact [INSTRUCTIONS]  summarise the older turns now (optionally: what to keep)
/undo [MESSAGE_ID] [--overwrite]
                        put back the files the last task (or that message's task) changed;
                        files changed since it stay as they are unless --overwrite
/agents                 list the agents; /agent NAME switches this conversation to one
/skills                 list the skills; /skill NAME [message] runs a task with that skill
/mcp [restart NAME]     list the MCP servers and their tools, or reconnect one
/help                   this list
/quit                   leave (Ctrl-D too); Ctrl-C stops a running task"""


def demo_banner(terminal: CliTerminal) -> str:
    """The line saying the demo model answers, with what to try; "" for a real model."""
    if terminal.services.provider.name != "demo":
        return ""
    from model.demo import demo_suggestions

    head = terminal.printer.paint("DEMO", YELLOW, BOLD)
    return (
        f"{head} · a scripted model plays a few tasks: no API key, no network; the tools "
        f"are real and work on this workspace.\nTry: {' · '.join(demo_suggestions())}\n"
    )


TRY_THE_DEMO = (
    "No key yet? `make demo DEMO_FRONT=cli` tries a scripted model on a sample workspace "
    "(no key, no network; `make demo` for the page)."
)


def run_once(terminal: CliTerminal, prompt: str) -> int:
    """`main.py cli -p`: one task, then an exit code and a one-line reason on failure."""
    if not terminal.json_mode:
        terminal.err.write(demo_banner(terminal))
    try:
        reason = terminal.run_foreground(prompt)
    except KeyError as exc:  # an unknown skill or agent
        terminal.err.write(f"error: {exc.args[0] if exc.args else exc}\n")
        return 2
    except NotConfigured as exc:
        terminal.err.write(f"error: {exc}\n{TRY_THE_DEMO}\n")
        return 2
    except DiskFull as exc:  # the message was not kept
        terminal.err.write(f"error: {exc.code}: {exc}\n")
        return EXIT_CODES["error"]
    return task_exit(terminal, reason)


class TaskOutcome(Protocol):
    """What a terminal (local or remote) knows of its last task, for `-p`'s exit."""

    err: TextIO
    declined: list[str]
    last_error: str

    @property
    def conversation_id(self) -> str | None: ...

    @property
    def iteration(self) -> int: ...


def task_exit(terminal: TaskOutcome, reason: DoneReason) -> int:
    """`-p`'s last lines (the conversation, and why the task failed) and its exit code."""
    terminal.err.write(f"conversation: {terminal.conversation_id}\n")
    if reason == "complete" and terminal.declined:
        terminal.err.write(f"error: declined: {'; '.join(terminal.declined)}\n")
        return EXIT_DECLINED
    if reason != "complete":
        detail = {
            "error": terminal.last_error or "the task failed",
            "max_iterations": f"stopped after {terminal.iteration} model calls, the agent's "
            "max_iterations",
            "cancelled": "cancelled",
            "budget": terminal.last_error or "stopped: a budget is used up",
            "loop": terminal.last_error or "stopped: the model repeated itself",
            "interrupted": terminal.last_error or "the server stopped while the task ran",
        }[reason]
        terminal.err.write(f"error: {detail}\n")
    return EXIT_CODES[reason]


def repl(terminal: CliTerminal) -> int:
    """The interactive session."""
    with contextlib.suppress(ImportError):
        import readline  # noqa: F401  (line editing and history for input())
    provider = terminal.services.provider
    # The model client (the `openai` import) is built while the first prompt is typed.
    threading.Thread(target=terminal.services.warm_up, name="warm-up", daemon=True).start()
    terminal.out.write(
        f"Workspace Agent — {terminal.services.workspace.root}\n"
        f"{provider.name} · {provider.model} · /help for commands\n" + demo_banner(terminal)
    )
    if not provider.configured:
        terminal.err.write(f"{provider.problem}\n{TRY_THE_DEMO}\n")
    return prompt_loop(terminal, COMMANDS, lambda line: _run_prompt(terminal, line))


def _run_prompt(terminal: CliTerminal, line: str) -> None:
    try:
        terminal.run_foreground(line)
    except KeyError as exc:  # an unknown skill or agent
        terminal.err.write(f"{exc.args[0] if exc.args else exc}\n")
    except (NotConfigured, DiskFull) as exc:
        terminal.err.write(f"error: {exc}\n")


class Console(Protocol):
    out: TextIO
    err: TextIO


C = TypeVar("C", bound=Console)
Commands = Mapping[str, Callable[[C, str], str]]


def prompt_loop(terminal: C, commands: Commands[C], run_prompt: Callable[[str], None]) -> int:
    """Read prompts and slash commands until /quit or Ctrl-D (local and remote sessions)."""
    while True:
        try:
            line = input("› ").strip()
        except EOFError:
            terminal.out.write("\n")
            return 0
        except KeyboardInterrupt:
            terminal.out.write("\n")
            continue
        if not line:
            continue
        if line.startswith("/") and not line.startswith("/skill "):
            if not dispatch(terminal, line, commands):
                return 0
            continue
        run_prompt(line)
        terminal.out.write("\n")


def run_command(terminal: CliTerminal, line: str) -> bool:
    """Run one slash command; False means quit."""
    return dispatch(terminal, line, COMMANDS)


def dispatch(terminal: C, line: str, commands: Commands[C]) -> bool:
    """Run one slash command of `commands`; False means quit."""
    name, _, arg = line[1:].partition(" ")
    arg, out = arg.strip(), terminal.out
    if name in ("quit", "exit", "q"):
        return False
    handler = commands.get(name)
    if handler is None:
        out.write(f"unknown command /{name}; /help lists them\n")
        return True
    try:
        out.write(handler(terminal, arg).rstrip("\n") + "\n")
    except (ToolError, ConversationNotFound, NotConfigured, TaskBusy, ValueError) as exc:
        terminal.err.write(f"{exc}\n")
    except KeyError as exc:
        terminal.err.write(f"{exc.args[0] if exc.args else exc}\n")
    return True


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


APPROVAL_MODES = ("auto", "ask", "read-only")
APPROVAL_MEANING = {
    "auto": "every tool runs without asking",
    "ask": "asks before commands, deletions, renames and overwrites",
    "read-only": "reading tools only",
}


def choice(value: str, allowed: tuple[str, ...], what: str) -> str:
    if value not in allowed:
        raise ValueError(f"usage: /{what} {'|'.join(allowed)}")
    return value


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


def agents_text(
    rows: Sequence[Mapping[str, Any]], problems: Sequence[tuple[object, str]], current: str
) -> str:
    """`/agents`: one line each, `*` on the conversation's; then the definitions that broke."""
    lines = [
        f"{'*' if a['name'] == current else ' '} {a['name']:<12} {a['mode']:<12} {a['description']}"
        for a in rows
    ]
    lines += [f"  broken: {path}: {message}" for path, message in problems]
    return "\n".join(lines)


def _agent(t: CliTerminal, arg: str) -> str:
    if not arg:
        return f"agent: {t.agent} (/agents lists them)"
    t.agent = t.services.agents.get(arg).name
    return f"agent: {t.agent}"


def _skills(t: CliTerminal, _: str) -> str:
    return skills_text(t.services.skills.summaries())


def skills_text(rows: Sequence[Mapping[str, Any]]) -> str:
    if not rows:
        return "no skills (add folders with a SKILL.md to .agents/skills/ in the workspace)"
    return "\n".join(
        f"  {r['name']:<20} broken: {r['broken']}"
        if "broken" in r
        else f"  {r['name']:<20} {r['description']}"
        for r in rows
    )


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


def mcp_text(status: Mapping[str, Any], where: str) -> str:
    """`/mcp`: the servers (`get_status.mcp`'s shape), their state and tools' policies."""
    lines = [f"  problem: {p['path']}: {p['message']}" for p in status["problems"]]
    for server in status["servers"]:
        state = server["state"] + (f": {server['error']}" if server["error"] else "")
        lines.append(f"  {server['name']:<16} {state}")
        lines += [f"      {tool['name']}  ({_mcp_policy(tool)})" for tool in server["tools"]]
    if not status["servers"]:
        lines.append(f"  no MCP servers: add an `mcpServers` object to {where} (see the README)")
    return "MCP servers:\n" + "\n".join(lines)


def _mcp_policy(tool: dict[str, Any]) -> str:
    if tool["read_only"]:
        return "read-only"
    return "asks in ask mode" if tool["asks"] else "allowed without asking"


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
