"""The terminal front: one task with `-p`, or an interactive session with slash commands."""

from __future__ import annotations

import contextlib
import queue
import sys
import threading
from typing import TextIO

from core.cli_printer import YELLOW, EventPrinter, json_line, use_color
from core.events import DoneReason, Error, Event, ToolEvent
from core.main_terminal import MainTerminal
from core.services import AgentServices
from modules.results import ToolError
from utils.conversation_store import ConversationNotFound

HELP = """\
/status                 model, mode, approval, iteration, context used/limit, focus files
/mode fast|thinking     switch the thinking policy
/approval auto|ask|read-only
/new                    start a new conversation
/history [ID]           list recent conversations, or open one by id
/focus PATH             keep a file's current content in every model call (at most 3)
/unfocus PATH           stop doing so
/memory                 show the main and this conversation's memory
/undo [MESSAGE_ID]      put back the files the last task (or that message's task) changed
/agents                 list the agents; /agent NAME switches this conversation to one
/skills                 list the skills; /skill NAME [message] runs a task with that skill
/help                   this list
/quit                   leave (Ctrl-D too); Ctrl-C stops a running task"""

EXIT_CODES: dict[DoneReason, int] = {
    "complete": 0, "error": 1, "max_iterations": 3, "cancelled": 130,
}


class CliTerminal(MainTerminal):
    """Prints events as text (or JSON lines) and asks approvals on the terminal."""

    def __init__(
        self, services: AgentServices, conversation_id: str | None = None, *,
        json_mode: bool = False, out: TextIO = sys.stdout, err: TextIO = sys.stderr,
        stdin: TextIO = sys.stdin,
    ) -> None:
        self.json_mode = json_mode
        self.out, self.err, self.stdin = out, err, stdin
        self.printer = EventPrinter(out, err, color=use_color(out))
        self.last_error = ""
        self._approvals: queue.Queue[ToolEvent] = queue.Queue()
        super().__init__(services, conversation_id, sink=self._show)

    def _show(self, event: Event) -> None:
        if isinstance(event, Error):
            self.last_error = f"{event.code}: {event.message}"
        if isinstance(event, ToolEvent) and event.phase == "approval":
            self._approvals.put(event)
        if self.json_mode:
            self.out.write(json_line(event) + "\n")
            self.out.flush()
        else:
            self.printer.render(event)

    def run_foreground(self, text: str) -> DoneReason:
        """Run one task in a worker thread; Ctrl-C stops it, approvals are asked here.

        A text starting `/skill NAME` runs with that skill's instructions.
        """
        self.last_error = ""
        skill, text = split_skill(text)
        task = self.begin_task(text, skill=skill)
        outcome: list[DoneReason] = []
        worker = threading.Thread(target=lambda: outcome.append(self.run_task(task)),
                                  name="agent-task", daemon=True)
        worker.start()
        while worker.is_alive():
            try:
                try:
                    request = self._approvals.get(timeout=0.1)
                except queue.Empty:
                    continue
                self._ask(request)
            except KeyboardInterrupt:
                self.cancel()
        worker.join()
        return outcome[0]

    def _ask(self, request: ToolEvent) -> None:
        if not self.stdin.isatty():
            self.err.write(
                f"{request.tool} needs approval but there is no terminal to ask: declined.\n"
            )
            self.approve(request.call_id, False)
            return
        self.err.write(self.printer.paint(f"\n{request.tool} wants to run:\n", YELLOW))
        self.err.write(f"{request.preview or ''}\n")
        for warning in request.warnings or ():
            self.err.write(self.printer.paint(f"warning: it {warning}\n", YELLOW))
        self.err.write("Allow? [y]es / [n]o / [a]lways for this tool: ")
        self.err.flush()
        answer = self.stdin.readline().strip().lower()
        self.approve(request.call_id, answer in ("y", "yes", "a", "always"),
                     always=answer in ("a", "always"))


def split_skill(text: str) -> tuple[str | None, str]:
    """(skill, message) of a `/skill NAME message` line; (None, text) for any other text."""
    if not text.startswith("/skill "):
        return None, text
    name, _, rest = text.removeprefix("/skill ").strip().partition(" ")
    return name, rest.strip() or f"Follow the {name} skill."


def run_once(terminal: CliTerminal, prompt: str) -> int:
    """`main.py cli -p`: one task, then an exit code and a one-line reason on failure."""
    try:
        reason = terminal.run_foreground(prompt)
    except KeyError as exc:  # an unknown skill or agent
        terminal.err.write(f"error: {exc.args[0] if exc.args else exc}\n")
        return 2
    terminal.out.write("\n" if not terminal.json_mode else "")
    terminal.err.write(f"conversation: {terminal.conversation_id}\n")
    if reason != "complete":
        detail = {
            "error": terminal.last_error or "the task failed",
            "max_iterations": f"stopped after {terminal.settings.max_iterations} model calls",
            "cancelled": "cancelled",
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
    terminal.out.write(f"Workspace Agent — {terminal.services.workspace.root}\n"
                       f"{provider.name} · {provider.model} · /help for commands\n")
    if not provider.configured:
        terminal.err.write(provider.problem + "\n")
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
            if not run_command(terminal, line):
                return 0
            continue
        try:
            terminal.run_foreground(line)
        except KeyError as exc:  # an unknown skill or agent
            terminal.err.write(f"{exc.args[0] if exc.args else exc}\n")
            continue
        terminal.out.write("\n")


def run_command(terminal: CliTerminal, line: str) -> bool:
    """Run one slash command; False means quit."""
    name, _, arg = line[1:].partition(" ")
    arg, out = arg.strip(), terminal.out
    if name in ("quit", "exit", "q"):
        return False
    handler = COMMANDS.get(name)
    if handler is None:
        out.write(f"unknown command /{name}; /help lists them\n")
        return True
    try:
        out.write(handler(terminal, arg).rstrip("\n") + "\n")
    except (ToolError, ConversationNotFound, ValueError) as exc:
        terminal.err.write(f"{exc}\n")
    except KeyError as exc:
        terminal.err.write(f"{exc.args[0] if exc.args else exc}\n")
    return True


def _status(t: CliTerminal, _: str) -> str:
    p, usage = t.services.provider, t.context_usage
    focus = ", ".join(t.focus.paths()) or "none"
    runner = t.services.runner
    isolation = "".join(f"\n  {line}" for line in runner.isolation)
    return (f"agent {t.agent} · provider {p.name} · model {p.model} · mode {t.mode} · "
            f"approval {t.approval}\n"
            f"conversation {t.conversation_id or '(new)'} · iteration {t.iteration}\n"
            f"context {usage.used_tokens:,} / {usage.limit_tokens:,} tokens · focus: {focus}\n"
            f"sandbox {runner.kind}:{isolation}")


def _choice(value: str, allowed: tuple[str, ...], what: str) -> str:
    if value not in allowed:
        raise ValueError(f"usage: /{what} {'|'.join(allowed)}")
    return value


def _mode(t: CliTerminal, arg: str) -> str:
    t.mode = _choice(arg, ("fast", "thinking"), "mode")  # type: ignore[assignment]
    return f"mode: {t.mode}"


def _approval(t: CliTerminal, arg: str) -> str:
    t.approval = _choice(arg, ("auto", "ask", "read-only"), "approval")  # type: ignore[assignment]
    return f"approval: {t.approval}"


def _new(t: CliTerminal, _: str) -> str:
    t.new_conversation()
    return "new conversation"


def _history(t: CliTerminal, arg: str) -> str:
    if arg:
        t.open_conversation(arg)
        conversation = t.conversation
        assert conversation is not None
        return f"opened {arg}: {len(conversation.path())} messages on this branch"
    rows = t.services.store.list()[:20]
    if not rows:
        return "no conversations yet"
    return "\n".join(f"{m['id']}  {m['updated_at'][:16]}  {m.get('title') or '(untitled)'}"
                     for m in rows)


def _focus(t: CliTerminal, arg: str) -> str:
    path = t.services.workspace.relative(t.services.workspace.resolve(arg))
    if not t.services.workspace.resolve(arg).is_file():
        raise ValueError(f"{arg} is not a file in the workspace")
    t.focus.add(path)
    t.save_focus()
    return f"focus: {', '.join(t.focus.paths())}"


def _unfocus(t: CliTerminal, arg: str) -> str:
    t.focus.remove(t.services.workspace.relative(t.services.workspace.resolve(arg)))
    t.save_focus()
    return f"focus: {', '.join(t.focus.paths()) or 'none'}"


def _memory(t: CliTerminal, _: str) -> str:
    memory, cid = t.services.memory, t.conversation_id or ""
    main = memory.read("main", cid) or "(empty)"
    task = memory.read("task", cid) if cid else ""
    return f"main memory:\n{main}\n\nthis conversation's memory:\n{task or '(empty)'}"


def _undo(t: CliTerminal, arg: str) -> str:
    result = t.undo(arg or None)
    lines = [result.message]
    lines += [f"  restored {path}" for path in result.restored]
    lines += [f"  skipped  {reason}" for reason in result.skipped]
    return "\n".join(lines)


def _agents(t: CliTerminal, _: str) -> str:
    catalog = t.services.agents
    lines = [f"{'*' if a['name'] == t.agent else ' '} {a['name']:<12} {a['mode']:<12} "
             f"{a['description']}" for a in catalog.summaries()]
    lines += [f"  broken: {p.path}: {p.message}" for p in catalog.problems]
    return "\n".join(lines)


def _agent(t: CliTerminal, arg: str) -> str:
    if not arg:
        return f"agent: {t.agent} (/agents lists them)"
    t.agent = t.services.agents.get(arg).name
    return f"agent: {t.agent}"


def _skills(t: CliTerminal, _: str) -> str:
    rows = t.services.skills.summaries()
    if not rows:
        return "no skills (add folders with a SKILL.md to .agents/skills/ in the workspace)"
    return "\n".join(f"  {r['name']:<20} broken: {r['broken']}" if "broken" in r
                     else f"  {r['name']:<20} {r['description']}" for r in rows)


COMMANDS = {
    "status": _status, "mode": _mode, "approval": _approval, "new": _new,
    "history": _history, "focus": _focus, "unfocus": _unfocus, "memory": _memory,
    "undo": _undo, "agents": _agents, "agent": _agent, "skills": _skills,
    "help": lambda t, a: HELP,
}
